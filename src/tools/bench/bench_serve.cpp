#include "tools/bench/bench_serve.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "text/tokenizer.h"
#include "tools/bench/bench_serve_breakdown.h"
#include "tools/bench/bench_serve_client.h"
#include "tools/bench/bench_serve_load.h"
#include "tools/bench/bench_serve_report.h"

namespace densa::bench {

using json = nlohmann::json;

namespace {

// The server's MoE routing counters (densa serve --routing-stats); nullopt when it has none.
std::optional<RoutingLoad> fetch_routing(const std::string& origin) {
  httplib::Client http(origin);
  http.set_connection_timeout(5, 0);
  http.set_read_timeout(10, 0);
  const httplib::Result r = http.Get("/metrics");
  if (!r || r->status != 200) return std::nullopt;
  return parse_routing_metrics(r->body);
}

Result<std::optional<Tokenizer>> load_tokenizer(const BenchServeConfig& c) {
  if (c.tokenizer_free) return std::optional<Tokenizer>();
  std::filesystem::path p = c.tokenizer;
  std::error_code ec;
  if (p.empty()) {
    // The served model name is often a local path: use its tokenizer when there is one.
    const std::filesystem::path m = c.model;
    if (std::filesystem::is_regular_file(m / "tokenizer.model", ec)) p = m / "tokenizer.model";
    if (p.empty()) return std::optional<Tokenizer>();
  }
  if (std::filesystem::is_directory(p, ec)) p /= "tokenizer.model";
  DENSA_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_sentencepiece_file(p));
  return std::optional<Tokenizer>(std::move(tok));
}

Result<std::vector<BenchPrompt>> make_prompts(const BenchServeConfig& c, const std::optional<Tokenizer>& tok,
                                              uint64_t seed) {
  std::function<int64_t(const std::string&)> count;
  if (tok) count = [&tok](const std::string& s) { return static_cast<int64_t>(tok->encode(s, false).size()); };
  if (c.dataset == "random") return random_word_prompts(c.num_prompts, c.input_len, c.output_len, seed, count);
  if (c.dataset == "random-ids") {
    // Skip the special and byte tokens of a Llama-style vocabulary when the size is known.
    const int32_t hi = tok ? static_cast<int32_t>(tok->vocab_size()) : 1000;
    return random_id_prompts(c.num_prompts, c.input_len, c.output_len, seed, std::min<int32_t>(259, hi - 1), hi);
  }
  return file_prompts(c.dataset, c.num_prompts, c.output_len, count);
}

// The HTTP client's settings from the command line.
Result<ClientOptions> client_options(const BenchServeConfig& c) {
  ClientOptions client;
  DENSA_ASSIGN_OR_RETURN(client.endpoint, parse_endpoint(c.base_url, c.endpoint));
  client.model = c.model;
  client.api_key = c.api_key;
  client.timeout_s = c.timeout_s;
  if (!c.extra_body_json.empty()) {
    client.extra_body = json::parse(c.extra_body_json, nullptr, false);
    if (client.extra_body.is_discarded() || !client.extra_body.is_object()) {
      return invalid_argument("--extra-body must be a JSON object");
    }
  }
  if (c.ignore_eos) client.extra_body["ignore_eos"] = true;
  return client;
}

// What the report says about the run besides its measurements.
BenchMeta bench_meta(const BenchServeConfig& c, const ClientOptions& client, bool tokenizer_free) {
  BenchMeta meta;
  meta.base_url = c.base_url;
  meta.endpoint = client.endpoint.path;
  meta.model = c.model;
  meta.dataset = c.dataset;
  meta.mode = c.request_rate.empty() ? "concurrency" : "request_rate";
  meta.input_len = c.input_len;
  meta.output_len = c.output_len;
  meta.num_prompts = c.num_prompts;
  meta.repeats = std::max(1, c.repeats);
  meta.seed = c.seed;
  meta.tokenizer_free = tokenizer_free;
  meta.slo = c.slo;
  return meta;
}

}  // namespace

Status run_bench_serve(const BenchServeConfig& c) {
  if (c.model.empty()) return invalid_argument("--model is required (the name the server serves)");
  if (c.concurrency.empty() && c.request_rate.empty()) {
    return invalid_argument("give --concurrency LIST or --request-rate LIST");
  }
  DENSA_ASSIGN_OR_RETURN(const ClientOptions client, client_options(c));
  DENSA_ASSIGN_OR_RETURN(std::optional<Tokenizer> tok, load_tokenizer(c));

  const BenchMeta meta = bench_meta(c, client, !tok.has_value());

  if (c.warmup_requests > 0) {
    DENSA_ASSIGN_OR_RETURN(std::vector<BenchPrompt> warm, make_prompts(c, tok, c.seed ^ 0x5eed));
    warm.resize(std::min<size_t>(warm.size(), c.warmup_requests));
    StreamingClient http(client);
    for (const BenchPrompt& p : warm) {
      const RequestRecord r = http.send(p, std::chrono::steady_clock::now());
      if (!r.ok) return unavailable("warm-up request failed: " + r.error);
    }
  }

  std::vector<double> levels;
  if (meta.mode == "concurrency") {
    for (int v : c.concurrency) levels.push_back(v);
  } else {
    levels = c.request_rate;
  }
  const std::optional<RoutingLoad> routing_before = fetch_routing(client.endpoint.origin);
  std::vector<LevelResult> results;
  for (int rep = 0; rep < meta.repeats; ++rep) {
    for (size_t li = 0; li < levels.size(); ++li) {
      // Fresh prompts per level and repeat (no prefix-cache reuse across levels), seeded.
      const uint64_t seed = c.seed * 1000003 + rep * 1009 + li;
      DENSA_ASSIGN_OR_RETURN(std::vector<BenchPrompt> prompts, make_prompts(c, tok, seed));
      LoadPlan plan;
      plan.seed = seed;
      plan.progress = c.progress;
      if (meta.mode == "concurrency") {
        plan.concurrency = static_cast<int>(levels[li]);
        plan.label = "concurrency " + std::to_string(plan.concurrency);
      } else {
        plan.request_rate = levels[li];
        plan.concurrency = c.max_concurrency;
        char buf[48];
        std::snprintf(buf, sizeof(buf), "rate %g req/s", levels[li]);
        plan.label = buf;
      }
      if (meta.repeats > 1) plan.label += " #" + std::to_string(rep);
      LevelRun run = run_level(client, prompts, plan);
      LevelResult lr;
      lr.metrics = compute_level_metrics(run.records, run.duration_s, c.slo);
      lr.metrics.level = levels[li];
      lr.metrics.repeat_idx = rep;
      lr.records = std::move(run.records);
      if (lr.metrics.num_ok == 0) {
        std::string why;
        for (const RequestRecord& r : lr.records) {
          if (!r.error.empty()) {
            why = r.error;
            break;
          }
        }
        std::fprintf(stderr, "densa bench serve: %s: every request failed: %s\n", plan.label.c_str(), why.c_str());
      }
      results.push_back(std::move(lr));
    }
  }

  std::error_code ec;
  std::filesystem::create_directories(c.out_dir, ec);
  if (ec) return not_found(c.out_dir + ": cannot create the output directory: " + ec.message());
  const std::filesystem::path dir = c.out_dir;
  std::string md = result_markdown(meta, results);
  json result = result_json(meta, results);
  DENSA_ASSIGN_OR_RETURN(std::vector<std::string> plots, write_plots(dir, meta, results));
  // Latency split (servers that report stage times) and the run's MoE routing load.
  const std::string breakdown = breakdown_markdown(meta, results);
  if (!breakdown.empty()) {
    md += breakdown;
    for (size_t i = 0; i < results.size() && i < result["levels"].size(); ++i)
      result["levels"][i]["breakdown"] = breakdown_json(results[i].metrics);
    DENSA_RETURN_IF_ERROR(write_text_file(dir / "latency_breakdown.svg", render_svg_plot(breakdown_plot(meta, results))));
    plots.push_back("latency_breakdown.svg");
  }
  if (const std::optional<RoutingLoad> after = fetch_routing(client.endpoint.origin)) {
    const RoutingLoad load = routing_delta(*after, routing_before);
    md += routing_markdown(load);
    result["moe_routing"] = routing_json(load);
    DENSA_RETURN_IF_ERROR(write_text_file(dir / "routing_load.svg", render_svg_plot(routing_plot(load))));
    plots.push_back("routing_load.svg");
  }
  DENSA_RETURN_IF_ERROR(write_text_file(dir / "result.json", result.dump(1) + "\n"));
  DENSA_RETURN_IF_ERROR(write_text_file(dir / "summary.md", md));
  std::cout << md << std::flush;
  std::fprintf(stderr, "wrote %s/result.json, summary.md", c.out_dir.c_str());
  for (const std::string& p : plots) std::fprintf(stderr, ", %s", p.c_str());
  std::fprintf(stderr, "\n");
  for (const LevelResult& lr : results) {
    if (lr.metrics.num_ok == 0) return unavailable("a level had no successful request (see result.json errors)");
  }
  return Status::ok();
}

Status run_bench_compare(const std::string& a_path, const std::string& b_path, const std::string& out_json) {
  json files[2];
  const std::string paths[2] = {a_path, b_path};
  for (int i = 0; i < 2; ++i) {
    std::ifstream in(paths[i]);
    if (!in) return not_found(paths[i] + ": cannot open");
    files[i] = json::parse(in, nullptr, false);
    if (files[i].is_discarded()) return invalid_argument(paths[i] + ": not valid JSON");
  }
  Result<Comparison> cmp = [&]() -> Result<Comparison> {
    try {
      return compare_results(files[0], files[1]);
    } catch (const json::exception& e) {
      return invalid_argument(std::string("--compare: malformed result file: ") + e.what());
    }
  }();
  if (!cmp.is_ok()) return cmp.status();
  std::cout << comparison_markdown(cmp.value()) << std::flush;
  if (!out_json.empty()) DENSA_RETURN_IF_ERROR(write_text_file(out_json, comparison_json(cmp.value()).dump(1) + "\n"));
  return Status::ok();
}

}  // namespace densa::bench
