#include "tools/bench/bench_serve_report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "tools/bench/svg_plot.h"

namespace densa::bench {

using json = nlohmann::json;

namespace {

json distribution_json(const Distribution& d) {
  return {{"n", d.n},     {"mean", d.mean}, {"stddev", d.stddev}, {"min", d.min},
          {"median", d.median}, {"p90", d.p90}, {"p99", d.p99}, {"max", d.max}};
}

std::string printf_string(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string level_name(const std::string& mode) { return mode == "request_rate" ? "rate (req/s)" : "concurrency"; }

}  // namespace

json result_json(const BenchMeta& meta, const std::vector<LevelResult>& levels) {
  json j;
  j["meta"] = {{"tool", "densa bench serve"},
               {"base_url", meta.base_url},
               {"endpoint", meta.endpoint},
               {"model", meta.model},
               {"dataset", meta.dataset},
               {"mode", meta.mode},
               {"input_len", meta.input_len},
               {"output_len", meta.output_len},
               {"num_prompts", meta.num_prompts},
               {"repeats", meta.repeats},
               {"seed", meta.seed},
               {"tokenizer_free", meta.tokenizer_free},
               {"slo_ttft_ms", meta.slo.ttft_ms ? json(*meta.slo.ttft_ms) : json(nullptr)},
               {"slo_tpot_ms", meta.slo.tpot_ms ? json(*meta.slo.tpot_ms) : json(nullptr)}};
  json arr = json::array();
  for (const LevelResult& lr : levels) {
    const LevelMetrics& m = lr.metrics;
    json l = {{"level", m.level},
              {"repeat", m.repeat_idx},
              {"num_requests", m.num_requests},
              {"num_ok", m.num_ok},
              {"num_failed", m.num_failed},
              {"duration_s", m.duration_s},
              {"total_input_tokens", m.total_input_tokens},
              {"total_output_tokens", m.total_output_tokens},
              {"request_throughput", m.request_throughput},
              {"input_throughput", m.input_throughput},
              {"output_throughput", m.output_throughput},
              {"total_token_throughput", m.total_token_throughput},
              {"num_good", m.num_good},
              {"goodput", m.goodput},
              {"ttft_ms", distribution_json(m.ttft_ms)},
              {"tpot_ms", distribution_json(m.tpot_ms)},
              {"itl_ms", distribution_json(m.itl_ms)},
              {"e2e_ms", distribution_json(m.e2e_ms)}};
    json ttft = json::array(), tpot = json::array(), e2e = json::array(), errors = json::array();
    for (const RequestRecord& r : lr.records) {
      if (!r.ok) {
        if (errors.size() < 5) errors.push_back(r.error);
        continue;
      }
      ttft.push_back(r.ttft_s * 1e3);
      e2e.push_back(r.e2e_s * 1e3);
      if (auto t = tpot_s(r)) tpot.push_back(*t * 1e3);
    }
    l["samples"] = {{"ttft_ms", ttft}, {"tpot_ms", tpot}, {"e2e_ms", e2e}};
    l["errors"] = errors;
    arr.push_back(std::move(l));
  }
  j["levels"] = std::move(arr);
  return j;
}

std::string result_markdown(const BenchMeta& meta, const std::vector<LevelResult>& levels) {
  std::string o;
  o += "## Serving benchmark: " + meta.model + " at " + meta.base_url + "\n\n";
  o += "dataset " + meta.dataset + ", input " + std::to_string(meta.input_len) + ", output " +
       std::to_string(meta.output_len) + ", " + std::to_string(meta.num_prompts) + " prompts per level, seed " +
       std::to_string(meta.seed);
  if (meta.slo.ttft_ms || meta.slo.tpot_ms) {
    o += "; SLO";
    if (meta.slo.ttft_ms) o += " TTFT <= " + printf_string("%g", *meta.slo.ttft_ms) + " ms";
    if (meta.slo.tpot_ms) o += " TPOT <= " + printf_string("%g", *meta.slo.tpot_ms) + " ms";
  }
  o += "\n\n";
  o += "| " + level_name(meta.mode) +
       " | ok/failed | req/s | in tok/s | out tok/s | TTFT mean / p50 / p90 / p99 (ms) | TPOT mean / p50 / p90 / "
       "p99 (ms) | ITL mean / p50 / p99 (ms) | E2E mean / p50 / p99 (ms) | goodput (req/s) |\n";
  o += "|---|---|---|---|---|---|---|---|---|---|\n";
  const auto d4 = [](const Distribution& d) {
    return printf_string("%.1f", d.mean) + " / " + printf_string("%.1f", d.median) + " / " +
           printf_string("%.1f", d.p90) + " / " + printf_string("%.1f", d.p99);
  };
  const auto d3 = [](const Distribution& d) {
    return printf_string("%.1f", d.mean) + " / " + printf_string("%.1f", d.median) + " / " +
           printf_string("%.1f", d.p99);
  };
  for (const LevelResult& lr : levels) {
    const LevelMetrics& m = lr.metrics;
    std::string level = printf_string("%g", m.level);
    if (meta.repeats > 1) level += " (#" + std::to_string(m.repeat_idx) + ")";
    o += "| " + level + " | " + std::to_string(m.num_ok) + "/" + std::to_string(m.num_failed) + " | " +
         printf_string("%.2f", m.request_throughput) + " | " + printf_string("%.1f", m.input_throughput) + " | " +
         printf_string("%.1f", m.output_throughput) + " | " + d4(m.ttft_ms) + " | " + d4(m.tpot_ms) + " | " +
         d3(m.itl_ms) + " | " + d3(m.e2e_ms) + " | " + printf_string("%.2f", m.goodput) + " |\n";
  }
  o += "\nTPOT = (e2e - TTFT) / (output tokens - 1) per request (first token excluded); ITL = gaps between "
       "consecutive streamed token chunks; percentiles interpolate linearly.\n";
  return o;
}

Status write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return not_found(path.string() + ": cannot open for writing");
  out << text;
  if (!out.good()) return data_loss(path.string() + ": write failed");
  return Status::ok();
}

Result<std::vector<std::string>> write_plots(const std::filesystem::path& dir, const BenchMeta& meta,
                                             const std::vector<LevelResult>& levels) {
  const std::string x_label = level_name(meta.mode);
  const bool log_x = meta.mode == "concurrency";
  // Repeats of a level are averaged for the curves.
  std::map<double, std::vector<const LevelMetrics*>> by_level;
  for (const LevelResult& lr : levels) by_level[lr.metrics.level].push_back(&lr.metrics);
  const auto curve = [&](const std::string& name, double (*get)(const LevelMetrics&)) {
    PlotSeries s{name, {}, {}};
    for (const auto& [level, ms] : by_level) {
      double sum = 0;
      for (const LevelMetrics* m : ms) sum += get(*m);
      s.x.push_back(level);
      s.y.push_back(sum / static_cast<double>(ms.size()));
    }
    return s;
  };
  const std::string suffix = meta.mode == "request_rate" ? "rate" : "concurrency";
  std::vector<std::string> written;

  PlotSpec tput{"Output throughput vs " + x_label + " (" + meta.model + ")", x_label, "tokens/s", log_x};
  tput.series.push_back(curve("output tok/s", [](const LevelMetrics& m) { return m.output_throughput; }));
  tput.series.push_back(curve("total tok/s", [](const LevelMetrics& m) { return m.total_token_throughput; }));
  written.push_back("throughput_vs_" + suffix + ".svg");
  DENSA_RETURN_IF_ERROR(write_text_file(dir / written.back(), render_svg_plot(tput)));

  PlotSpec tpot{"TPOT vs " + x_label + " (" + meta.model + ")", x_label, "ms per output token", log_x};
  tpot.series.push_back(curve("mean", [](const LevelMetrics& m) { return m.tpot_ms.mean; }));
  tpot.series.push_back(curve("median", [](const LevelMetrics& m) { return m.tpot_ms.median; }));
  tpot.series.push_back(curve("p99", [](const LevelMetrics& m) { return m.tpot_ms.p99; }));
  written.push_back("tpot_vs_" + suffix + ".svg");
  DENSA_RETURN_IF_ERROR(write_text_file(dir / written.back(), render_svg_plot(tpot)));

  PlotSpec cdf{"TTFT CDF (" + meta.model + ")", "TTFT (ms)", "fraction of requests"};
  cdf.steps = true;
  std::map<double, std::vector<double>> ttft_by_level;
  for (const LevelResult& lr : levels) {
    for (const RequestRecord& r : lr.records) {
      if (r.ok) ttft_by_level[lr.metrics.level].push_back(r.ttft_s * 1e3);
    }
  }
  for (auto& [level, values] : ttft_by_level) {
    cdf.series.push_back(cdf_series(x_label + " " + printf_string("%g", level), std::move(values)));
  }
  written.push_back("ttft_cdf.svg");
  DENSA_RETURN_IF_ERROR(write_text_file(dir / written.back(), render_svg_plot(cdf)));
  return written;
}

// ---- compare ----

namespace {

struct MetricDef {
  const char* name;
  bool higher_is_better;
  const char* sample;      // per-request sample key for the bootstrap, or nullptr
  Statistic stat;
  double (*get)(const json& level);
};

double dist(const json& l, const char* key, const char* field) { return l[key][field].get<double>(); }

const MetricDef kMetrics[] = {
    {"request_throughput", true, nullptr, Statistic::kMean, [](const json& l) { return l["request_throughput"].get<double>(); }},
    {"output_throughput", true, nullptr, Statistic::kMean, [](const json& l) { return l["output_throughput"].get<double>(); }},
    {"total_token_throughput", true, nullptr, Statistic::kMean, [](const json& l) { return l["total_token_throughput"].get<double>(); }},
    {"goodput", true, nullptr, Statistic::kMean, [](const json& l) { return l["goodput"].get<double>(); }},
    {"mean_ttft_ms", false, "ttft_ms", Statistic::kMean, [](const json& l) { return dist(l, "ttft_ms", "mean"); }},
    {"median_ttft_ms", false, "ttft_ms", Statistic::kMedian, [](const json& l) { return dist(l, "ttft_ms", "median"); }},
    {"p99_ttft_ms", false, nullptr, Statistic::kMean, [](const json& l) { return dist(l, "ttft_ms", "p99"); }},
    {"mean_tpot_ms", false, "tpot_ms", Statistic::kMean, [](const json& l) { return dist(l, "tpot_ms", "mean"); }},
    {"median_tpot_ms", false, "tpot_ms", Statistic::kMedian, [](const json& l) { return dist(l, "tpot_ms", "median"); }},
    {"p99_tpot_ms", false, nullptr, Statistic::kMean, [](const json& l) { return dist(l, "tpot_ms", "p99"); }},
    {"mean_itl_ms", false, nullptr, Statistic::kMean, [](const json& l) { return dist(l, "itl_ms", "mean"); }},
    {"mean_e2e_ms", false, "e2e_ms", Statistic::kMean, [](const json& l) { return dist(l, "e2e_ms", "mean"); }},
};

std::string label_of(const json& r) {
  const json& m = r["meta"];
  return m.value("model", std::string("?")) + " @ " + m.value("base_url", std::string("?"));
}

}  // namespace

Result<Comparison> compare_results(const json& a, const json& b) {
  for (const json* r : {&a, &b}) {
    if (!r->is_object() || !r->contains("levels") || !(*r)["levels"].is_array() || !r->contains("meta")) {
      return invalid_argument("--compare: not a densa bench serve result file (no meta/levels)");
    }
  }
  Comparison c;
  c.label_a = label_of(a);
  c.label_b = label_of(b);
  c.mode = a["meta"].value("mode", std::string("concurrency"));
  if (c.mode != b["meta"].value("mode", std::string("concurrency"))) {
    return invalid_argument("--compare: one file sweeps concurrency, the other request rate");
  }
  // Pair levels by (level, repeat).
  std::map<std::pair<double, int>, const json*> in_a;
  for (const json& l : a["levels"]) in_a[{l["level"].get<double>(), l["repeat"].get<int>()}] = &l;
  std::vector<std::pair<const json*, const json*>> pairs;
  for (const json& l : b["levels"]) {
    auto it = in_a.find({l["level"].get<double>(), l["repeat"].get<int>()});
    if (it != in_a.end() && (*it->second)["num_ok"].get<int>() > 0 && l["num_ok"].get<int>() > 0) {
      pairs.emplace_back(it->second, &l);
    }
  }
  if (pairs.empty()) return invalid_argument("--compare: the two files share no level with successful requests");
  c.num_pairs = static_cast<int>(pairs.size());
  std::set<double> levels;
  for (const auto& p : pairs) levels.insert((*p.first)["level"].get<double>());

  uint64_t seed = 1;
  for (const MetricDef& def : kMetrics) {
    MetricRatio mr;
    mr.metric = def.name;
    mr.higher_is_better = def.higher_is_better;
    std::vector<double> va, vb;
    for (const auto& [pa, pb] : pairs) {
      va.push_back(def.get(*pa));
      vb.push_back(def.get(*pb));
    }
    mr.overall = paired_ratio_ci(va, vb);
    for (double level : levels) {
      std::vector<double> la, lb, sa, sb;
      for (const auto& [pa, pb] : pairs) {
        if ((*pa)["level"].get<double>() != level) continue;
        la.push_back(def.get(*pa));
        lb.push_back(def.get(*pb));
        if (def.sample) {
          for (const json& v : (*pa)["samples"][def.sample]) sa.push_back(v.get<double>());
          for (const json& v : (*pb)["samples"][def.sample]) sb.push_back(v.get<double>());
        }
      }
      mr.levels.push_back(level);
      mr.per_level.push_back(def.sample && !sa.empty() && !sb.empty()
                                 ? bootstrap_ratio_ci(sa, sb, def.stat, 2000, seed++)
                                 : paired_ratio_ci(la, lb));
    }
    c.metrics.push_back(std::move(mr));
  }
  return c;
}

namespace {

json ratio_json(const RatioCi& r) {
  json j = {{"ratio", r.ratio}, {"n", r.n}};
  if (r.has_ci) j["ci95"] = {r.lo, r.hi};
  else j["ci95"] = nullptr;
  return j;
}

std::string ratio_text(const RatioCi& r) {
  std::string s = printf_string("%.3f", r.ratio);
  if (r.has_ci) s += " [" + printf_string("%.3f", r.lo) + ", " + printf_string("%.3f", r.hi) + "]";
  return s;
}

}  // namespace

json comparison_json(const Comparison& c) {
  json j = {{"a", c.label_a}, {"b", c.label_b}, {"mode", c.mode}, {"num_pairs", c.num_pairs},
            {"ratio", "B / A"}};
  json metrics = json::object();
  for (const MetricRatio& m : c.metrics) {
    json per = json::array();
    for (size_t i = 0; i < m.levels.size(); ++i) {
      json e = ratio_json(m.per_level[i]);
      e["level"] = m.levels[i];
      per.push_back(std::move(e));
    }
    metrics[m.metric] = {{"higher_is_better", m.higher_is_better}, {"overall", ratio_json(m.overall)},
                         {"per_level", std::move(per)}};
  }
  j["metrics"] = std::move(metrics);
  return j;
}

std::string comparison_markdown(const Comparison& c) {
  std::string o = "## A/B: B / A\n\nA = " + c.label_a + "\nB = " + c.label_b + "\n\n";
  o += "| metric | better | overall (geo-mean, 95% CI) |";
  std::string sep = "|---|---|---|";
  if (!c.metrics.empty()) {
    for (double level : c.metrics.front().levels) {
      o += " " + level_name(c.mode) + " " + printf_string("%g", level) + " |";
      sep += "---|";
    }
  }
  o += "\n" + sep + "\n";
  for (const MetricRatio& m : c.metrics) {
    o += "| " + m.metric + " | " + (m.higher_is_better ? "higher" : "lower") + " | " + ratio_text(m.overall) + " |";
    for (const RatioCi& r : m.per_level) o.append(" ").append(ratio_text(r)).append(" |");
    o += "\n";
  }
  o += "\nOverall: geometric mean of the per-(level, repeat) ratios, t-based 95% CI on the mean log-ratio "
       "(needs >= 2 pairs). Per level: percentile bootstrap over requests (2000 resamples) for mean/median "
       "latencies; t-based over repeats for throughputs and tail latencies (a CI needs --repeats >= 2).\n";
  return o;
}

}  // namespace densa::bench
