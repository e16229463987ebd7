// `densa bench`: benchmark commands. `bench serve` loads any OpenAI-compatible server with
// streamed requests (tools/bench/bench_serve.h); `bench serve --compare A.json B.json` compares two
// runs. `bench offline` (engine in process, cmd_bench_offline.cpp) measures prefill/decode speed.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "tools/bench/bench_serve.h"

namespace densa::cli {

void add_bench_offline_command(CLI::App* bench);  // cmd_bench_offline.cpp

namespace {

struct BenchServeArgs {
  bench::BenchServeConfig config;
  double slo_ttft_ms = 0;
  double slo_tpot_ms = 0;
  std::vector<std::string> compare;
  std::string compare_json;
  bool no_progress = false;
};

int run_bench_serve(BenchServeArgs& a) {
  Status st;
  if (!a.compare.empty()) {
    st = bench::run_bench_compare(a.compare[0], a.compare[1], a.compare_json);
  } else {
    if (a.slo_ttft_ms > 0) a.config.slo.ttft_ms = a.slo_ttft_ms;
    if (a.slo_tpot_ms > 0) a.config.slo.tpot_ms = a.slo_tpot_ms;
    a.config.progress = !a.no_progress;
    st = bench::run_bench_serve(a.config);
  }
  if (!st.is_ok()) {
    std::fprintf(stderr, "densa bench serve: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}

const CommandRegistrar kRegister([](CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks: serve (any OpenAI-compatible server), offline (engine in process)");
  bench->require_subcommand(1);
  add_bench_offline_command(bench);

  auto args = std::make_shared<BenchServeArgs>();
  bench::BenchServeConfig& c = args->config;
  CLI::App* cmd = bench->add_subcommand("serve", "load an OpenAI-compatible server with streamed requests");
  cmd->add_option("--base-url", c.base_url, "server URL, e.g. http://127.0.0.1:8080")->capture_default_str();
  cmd->add_option("--endpoint", c.endpoint, "/v1/completions or /v1/chat/completions")->capture_default_str();
  cmd->add_option("-m,--model", c.model, "model name the server serves");
  cmd->add_option("--api-key", c.api_key, "Bearer key");
  cmd->add_option("--dataset", c.dataset, "random | random-ids | FILE (JSONL {\"prompt\":...} or one prompt per line)")
      ->capture_default_str();
  cmd->add_option("--input-len", c.input_len, "prompt length (tokens with a tokenizer, else words)")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--output-len", c.output_len, "max_tokens per request")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--num-prompts", c.num_prompts, "requests per level")->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  auto* conc = cmd->add_option("--concurrency", c.concurrency, "levels: requests in flight, e.g. 1,4,16,64")
                   ->delimiter(',')->check(CLI::Range(1, 100000));
  auto* rate = cmd->add_option("--request-rate", c.request_rate, "levels: Poisson arrival rates in req/s")
                   ->delimiter(',')->check(CLI::PositiveNumber);
  conc->excludes(rate);
  cmd->add_option("--max-concurrency", c.max_concurrency, "cap on requests in flight with --request-rate (0 = none)")
      ->capture_default_str();
  cmd->add_option("--repeats", c.repeats, "runs of every level (for --compare CIs)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--warmup", c.warmup_requests, "requests sent before measuring")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", c.seed, "prompts and arrival times")->capture_default_str();
  cmd->add_option("--slo-ttft-ms", args->slo_ttft_ms, "goodput SLO on time to first token");
  cmd->add_option("--slo-tpot-ms", args->slo_tpot_ms, "goodput SLO on time per output token");
  cmd->add_option("--out-dir", c.out_dir, "where result.json, summary.md and the plots go")->capture_default_str();
  cmd->add_option("--tokenizer", c.tokenizer, "tokenizer.model or model dir: exact prompt lengths");
  cmd->add_flag("--tokenizer-free", c.tokenizer_free, "no local tokenizer: prompt tokens from usage only");
  cmd->add_flag("--ignore-eos", c.ignore_eos, "add \"ignore_eos\": true to requests");
  cmd->add_option("--extra-body", c.extra_body_json, "JSON object merged into every request body");
  cmd->add_option("--timeout", c.timeout_s, "per-request timeout in seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--no-progress", args->no_progress, "no progress bar");
  cmd->add_option("--compare", args->compare, "compare two result files A.json B.json (ratios B/A)")
      ->expected(2);
  cmd->add_option("--compare-json", args->compare_json, "with --compare: also write the comparison as JSON");
  cmd->callback([args] {
    if (int rc = run_bench_serve(*args); rc != 0) throw CLI::RuntimeError(rc);
  });
});

}  // namespace
}  // namespace densa::cli
