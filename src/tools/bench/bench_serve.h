#pragma once
// `densa bench serve` as a library call: builds the prompts, sweeps the levels (concurrency
// or request rate) with the load generator, and writes the result JSON, the Markdown summary
// and the plots. Also the `--compare` entry point. The CLI only maps flags onto these structs.
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tools/bench/bench_serve_metrics.h"

namespace densa::bench {

struct BenchServeConfig {
  std::string base_url = "http://127.0.0.1:8080";
  std::string endpoint = "/v1/completions";
  std::string model;
  std::string api_key;
  std::string dataset = "random";     // random | random-ids | path to a JSONL / text file
  int input_len = 128;
  int output_len = 128;
  int num_prompts = 100;              // per level and repeat
  std::vector<int> concurrency;       // levels; used when request_rate is empty
  std::vector<double> request_rate;   // levels in req/s (Poisson arrivals)
  int max_concurrency = 0;            // cap in request-rate mode; 0 = none
  int repeats = 1;
  int warmup_requests = 1;            // sent (and discarded) before the first level
  uint64_t seed = 0;
  Slo slo;
  std::string out_dir = "bench-serve-results";
  std::string tokenizer;              // tokenizer.model (or a model dir) for exact prompt lengths
  bool tokenizer_free = false;        // never tokenize locally (prompt tokens from usage only)
  bool ignore_eos = false;            // adds "ignore_eos": true (vLLM, SGLang, llama.cpp know it)
  std::string extra_body_json;        // JSON object merged into every request
  double timeout_s = 600;
  bool progress = true;
};

// Runs the sweep; prints the Markdown summary to stdout and the file names to stderr.
Status run_bench_serve(const BenchServeConfig& config);

// Compares two result files (ratios B/A); prints Markdown, writes JSON when out_json is set.
Status run_bench_compare(const std::string& a_path, const std::string& b_path, const std::string& out_json);

}  // namespace densa::bench
