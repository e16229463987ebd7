#include "tools/bench/bench_serve_breakdown.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>
#include <sstream>

namespace densa::bench {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string level_name(const BenchMeta& meta, double level) {
  return meta.mode == "concurrency" ? fmt("%.0f", level) : fmt("%g req/s", level);
}

// {max/mean, entropy / log(experts), hottest expert index}
struct Balance {
  int64_t total = 0;
  double imbalance = 0, entropy = 0;
  size_t hottest = 0;
};

Balance balance(const std::vector<int64_t>& counts) {
  Balance b;
  int64_t most = -1;
  for (size_t e = 0; e < counts.size(); ++e) {
    b.total += counts[e];
    if (counts[e] > most) {
      most = counts[e];
      b.hottest = e;
    }
  }
  if (b.total == 0 || counts.size() < 2) return b;
  const double mean = static_cast<double>(b.total) / static_cast<double>(counts.size());
  b.imbalance = static_cast<double>(most) / mean;
  for (int64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(b.total);
    b.entropy -= p * std::log(p);
  }
  b.entropy /= std::log(static_cast<double>(counts.size()));
  return b;
}

}  // namespace

std::optional<RoutingLoad> parse_routing_metrics(const std::string& text) {
  static const std::regex sample(R"re(^densa_moe_expert_tokens_total\{layer="(\d+)",expert="(\d+)"\} ([0-9.eE+]+)$)re");
  RoutingLoad load;
  std::istringstream in(text);
  std::string line;
  bool any = false;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, sample)) continue;
    const size_t l = std::stoul(m[1]), e = std::stoul(m[2]);
    if (l > 4096 || e > 65536) continue;
    if (load.expert_tokens.size() <= l) load.expert_tokens.resize(l + 1);
    if (load.expert_tokens[l].size() <= e) load.expert_tokens[l].resize(e + 1, 0);
    load.expert_tokens[l][e] = static_cast<int64_t>(std::stod(m[3]));
    any = true;
  }
  if (!any) return std::nullopt;
  return load;
}

RoutingLoad routing_delta(const RoutingLoad& after, const std::optional<RoutingLoad>& before) {
  RoutingLoad d = after;
  if (!before) return d;
  for (size_t l = 0; l < d.expert_tokens.size() && l < before->expert_tokens.size(); ++l)
    for (size_t e = 0; e < d.expert_tokens[l].size() && e < before->expert_tokens[l].size(); ++e)
      d.expert_tokens[l][e] -= before->expert_tokens[l][e];
  return d;
}

std::string breakdown_markdown(const BenchMeta& meta, const std::vector<LevelResult>& levels) {
  std::string out;
  for (const LevelResult& lr : levels) {
    const LevelMetrics& m = lr.metrics;
    if (m.server_ms.n == 0) continue;
    if (out.empty()) {
      out += "\n## Latency breakdown (client round trip = network + server)\n\n"
             "Per request: network = client e2e - the server's own time (handler entry to response "
             "built); queue, prefill and decode are the server's stages. Each column is its own "
             "percentile over the level's requests (ms).\n\n"
             "| " + std::string(meta.mode == "concurrency" ? "concurrency" : "rate") +
             " | stat | client e2e | server | network | queue | prefill | decode | server share |\n"
             "|---|---|---|---|---|---|---|---|---|\n";
    }
    const auto row = [&](const char* stat, double Distribution::*field) {
      const double e2e = m.e2e_ms.*field, server = m.server_ms.*field;
      out += "| " + level_name(meta, m.level) + " | " + stat + " | " + fmt("%.2f", e2e) + " | " + fmt("%.2f", server) +
             " | " + fmt("%.2f", m.network_ms.*field) + " | " + fmt("%.2f", m.queue_ms.*field) + " | " +
             fmt("%.2f", m.prefill_ms.*field) + " | " + fmt("%.2f", m.decode_ms.*field) + " | " +
             (e2e > 0 ? fmt("%.1f%%", 100.0 * server / e2e) : std::string("-")) + " |\n";
    };
    row("p50", &Distribution::median);
    row("p90", &Distribution::p90);
    row("p99", &Distribution::p99);
  }
  return out;
}

nlohmann::json breakdown_json(const LevelMetrics& m) {
  const auto d = [](const Distribution& x) {
    return nlohmann::json{{"n", x.n}, {"mean", x.mean}, {"median", x.median}, {"p90", x.p90}, {"p99", x.p99}};
  };
  return {{"server_ms", d(m.server_ms)},   {"network_ms", d(m.network_ms)}, {"queue_ms", d(m.queue_ms)},
          {"prefill_ms", d(m.prefill_ms)}, {"decode_ms", d(m.decode_ms)}};
}

PlotSpec breakdown_plot(const BenchMeta& meta, const std::vector<LevelResult>& levels) {
  PlotSpec p;
  p.title = "Median latency split: network + server stages";
  p.x_label = meta.mode == "concurrency" ? "concurrency" : "request rate (req/s)";
  p.y_label = "ms (median)";
  p.log_x = meta.mode == "concurrency";
  const std::pair<const char*, Distribution LevelMetrics::*> parts[] = {
      {"client e2e", &LevelMetrics::e2e_ms}, {"server", &LevelMetrics::server_ms},
      {"network", &LevelMetrics::network_ms}, {"queue", &LevelMetrics::queue_ms},
      {"prefill", &LevelMetrics::prefill_ms}, {"decode", &LevelMetrics::decode_ms}};
  for (const auto& [name, field] : parts) {
    PlotSeries s;
    s.name = name;
    for (const LevelResult& lr : levels) {
      if (lr.metrics.server_ms.n == 0) continue;
      s.x.push_back(lr.metrics.level);
      s.y.push_back((lr.metrics.*field).median);
    }
    p.series.push_back(std::move(s));
  }
  return p;
}

std::string routing_markdown(const RoutingLoad& load) {
  std::string out =
      "\n## MoE routing load (from the server's /metrics, this run only)\n\n"
      "| layer | routed tokens x top-k | max / mean | hottest expert (share) | coldest share | entropy / log(E) |\n"
      "|---|---|---|---|---|---|\n";
  for (size_t l = 0; l < load.expert_tokens.size(); ++l) {
    const std::vector<int64_t>& c = load.expert_tokens[l];
    const Balance b = balance(c);
    if (b.total == 0) continue;
    const int64_t coldest = *std::min_element(c.begin(), c.end());
    out += "| " + std::to_string(l) + " | " + std::to_string(b.total) + " | " + fmt("%.2f", b.imbalance) + " | " +
           std::to_string(b.hottest) + " (" + fmt("%.1f%%", 100.0 * c[b.hottest] / b.total) + ") | " +
           fmt("%.1f%%", 100.0 * coldest / b.total) + " | " + fmt("%.3f", b.entropy) + " |\n";
  }
  return out;
}

nlohmann::json routing_json(const RoutingLoad& load) {
  nlohmann::json layers = nlohmann::json::array();
  for (const std::vector<int64_t>& c : load.expert_tokens) {
    const Balance b = balance(c);
    layers.push_back({{"expert_tokens", c}, {"imbalance", b.imbalance}, {"entropy_ratio", b.entropy}});
  }
  return {{"layers", layers}};
}

PlotSpec routing_plot(const RoutingLoad& load) {
  PlotSpec p;
  p.title = "MoE routing load: share of each layer's tokens per expert";
  p.x_label = "expert";
  p.y_label = "share of routed tokens";
  for (size_t l = 0; l < load.expert_tokens.size(); ++l) {
    const std::vector<int64_t>& c = load.expert_tokens[l];
    const Balance b = balance(c);
    if (b.total == 0) continue;
    PlotSeries s;
    s.name = "layer " + std::to_string(l);
    for (size_t e = 0; e < c.size(); ++e) {
      s.x.push_back(static_cast<double>(e));
      s.y.push_back(static_cast<double>(c[e]) / static_cast<double>(b.total));
    }
    p.series.push_back(std::move(s));
  }
  if (!load.expert_tokens.empty() && !load.expert_tokens[0].empty()) {
    PlotSeries even;
    even.name = "balanced (1/E)";
    const size_t num_experts = load.expert_tokens[0].size();
    for (size_t e = 0; e < num_experts; ++e) {
      even.x.push_back(static_cast<double>(e));
      even.y.push_back(1.0 / static_cast<double>(num_experts));
    }
    p.series.push_back(std::move(even));
  }
  return p;
}

}  // namespace densa::bench
