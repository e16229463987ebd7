// `densa bench offline -m MODEL --batch B --prompt-len P --gen-len G [--repeats N]
// [--weight-dtype D] [--kv-dtype bf16|fp8] [--threads T] [--json FILE]`: prefill and decode
// speed through the Engine in process (tools/bench/bench_offline.h). Added to `densa bench` by
// cmd_bench.cpp.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/model_path.h"
#include "cli/parallel_options.h"
#include "cli/weight_options.h"
#include "model/model_loader.h"
#include "tools/bench/bench_offline.h"

namespace densa::cli {
namespace {

struct BenchOfflineArgs {
  std::string model;
  WeightArgs weights;
  std::string kv_dtype = "bf16";
  std::string json;
  bench::BenchOfflineConfig config;
  bool no_routing = false;
  ParallelArgs parallel;
};

int run_bench_offline(BenchOfflineArgs& a) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "densa bench offline: %s\n", m.c_str());
    return 1;
  };
  if (a.kv_dtype == "bf16") a.config.kv_dtype = DType::kBF16;
  else if (a.kv_dtype == "fp8") a.config.kv_dtype = DType::kFP8E4M3;
  else if (a.kv_dtype == "f32") a.config.kv_dtype = DType::kF32;
  else return fail("--kv-dtype must be bf16, fp8 or f32, not \"" + a.kv_dtype + "\"");
  a.config.routing_replay = !a.no_routing;
  Result<LoadOptions> opts = load_options_from(a.weights);
  if (!opts.is_ok()) return fail(opts.status().message());
  const std::string path = a.model.empty() ? default_model_path() : a.model;
  // Tensor / expert parallel: every rank loads its slice; rank 0 measures, the others follow.
  Result<std::unique_ptr<ParallelSetup>> parallel = setup_parallel(a.parallel);
  if (!parallel.is_ok()) return fail(parallel.status().message());
  const ParallelSetup& group = **parallel;
  if (group.active()) {
    opts->parallel = group.comms.layout;
    a.config.parallel = &group.comms;
  }
  Result<ModelWeights> w = load_model(path, *opts);
  if (!w.is_ok()) return fail(w.status().message());
  if (group.active() && !group.leader()) {
    if (Status s = run_engine_follower(*w, bench::bench_offline_engine_config(*w, a.config)); !s.is_ok()) {
      return fail("rank follower: " + s.message());
    }
    return 0;
  }
  Result<bench::BenchOfflineReport> r = bench::run_bench_offline(*w, a.config);
  if (!r.is_ok()) return fail(r.status().message());
  std::printf("%s", bench::bench_offline_summary(*r).c_str());
  if (!a.json.empty()) {
    std::ofstream out(a.json, std::ios::binary | std::ios::trunc);
    out << bench::bench_offline_json(*r) << "\n";
    if (!out) return fail(a.json + ": write failed");
  }
  return 0;
}

}  // namespace

void add_bench_offline_command(CLI::App* bench) {
  auto a = std::make_shared<BenchOfflineArgs>();
  bench::BenchOfflineConfig& c = a->config;
  CLI::App* cmd = bench->add_subcommand("offline", "prefill / decode tokens per second through the engine, in process");
  cmd->add_option("-m,--model", a->model,
                  "GGUF file or Hugging Face directory (no tokenizer needed; default: the MoE fixture in models/)");
  add_weight_options(cmd, a->weights);
  add_parallel_options(cmd, a->parallel);
  cmd->add_option("--batch", c.batch, "requests submitted together")->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--prompt-len", c.prompt_len, "prompt tokens per request")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--gen-len", c.gen_len, "generated tokens per request")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--repeats", c.repeats, "measured runs (median reported)")->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--kv-dtype", a->kv_dtype, "bf16 | fp8 | f32")->capture_default_str();
  cmd->add_option("--threads", c.num_threads, "kernel threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--page-size", c.page_size, "tokens per KV page")->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--seed", c.seed, "prompt ids")->capture_default_str();
  cmd->add_option("--max-step-tokens", c.max_step_tokens, "token budget of one engine step (0: batch * prompt-len)");
  cmd->add_flag("--no-routing-replay", a->no_routing, "MoE: do not replay to count routed experts (assume all)");
  cmd->add_option("--json", a->json, "also write the report as JSON");
  cmd->callback([a] {
    if (int rc = run_bench_offline(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace densa::cli
