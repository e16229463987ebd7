#pragma once
// What `densa bench serve` writes: the JSON result file (summary metrics plus per-request
// samples, so a later --compare can resample them), a Markdown summary, SVG plots, and the
// A/B comparison of two result files.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tools/bench/bench_serve_metrics.h"

namespace densa::bench {

// The run's settings, echoed into the result file.
struct BenchMeta {
  std::string base_url, endpoint, model, dataset;
  std::string mode = "concurrency";  // "concurrency" | "request_rate": what `level` means
  int input_len = 0, output_len = 0, num_prompts = 0, repeats = 1;
  uint64_t seed = 0;
  bool tokenizer_free = true;
  Slo slo;
};

struct LevelResult {
  LevelMetrics metrics;
  std::vector<RequestRecord> records;
};

nlohmann::json result_json(const BenchMeta& meta, const std::vector<LevelResult>& levels);
std::string result_markdown(const BenchMeta& meta, const std::vector<LevelResult>& levels);

// Writes throughput_vs_<mode>.svg, tpot_vs_<mode>.svg and ttft_cdf.svg into dir; returns the
// file names written.
Result<std::vector<std::string>> write_plots(const std::filesystem::path& dir, const BenchMeta& meta,
                                             const std::vector<LevelResult>& levels);

// ---- --compare A.json B.json ----

struct MetricRatio {
  std::string metric;     // e.g. "output_throughput", "mean_ttft_ms"
  bool higher_is_better = false;
  RatioCi overall;        // geometric mean over matched (level, repeat) pairs, t-based CI
  std::vector<double> levels;       // [matched levels] level of each per-level entry
  std::vector<RatioCi> per_level;   // [matched levels] bootstrap CI over requests (latency
                                    // metrics) or t-based CI over repeats (throughput)
};

struct Comparison {
  std::string label_a, label_b, mode;
  int num_pairs = 0;
  std::vector<MetricRatio> metrics;
};

Result<Comparison> compare_results(const nlohmann::json& a, const nlohmann::json& b);
nlohmann::json comparison_json(const Comparison& c);
std::string comparison_markdown(const Comparison& c);

Status write_text_file(const std::filesystem::path& path, const std::string& text);

}  // namespace densa::bench
