// `densa eval`: perplexity and KL divergence of weight / KV precision choices against a
// baseline combination (tools/eval/eval.h). Prints a table; --json / --markdown write files.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/model_path.h"
#include "tools/eval/eval.h"

namespace densa::cli {
namespace {

struct EvalArgs {
  EvalConfig config;
  std::string text, ids, baseline = "bf16+x-f32/bf16", json_out, markdown_out;
  int threads = 0;
};

int fail(const std::string& msg) {
  std::fprintf(stderr, "densa eval: %s\n", msg.c_str());
  return 1;
}

bool write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

int run_eval_cmd(EvalArgs& a) {
  EvalConfig& c = a.config;
  if (c.model_path.empty()) c.model_path = default_model_path();
  if (a.text.empty() == a.ids.empty()) return fail("give exactly one of --text FILE or --ids FILE.u16.bin");
  const size_t slash = a.baseline.find('/');
  if (slash == std::string::npos) return fail("--baseline is WEIGHTS/KV, e.g. bf16/bf16");
  c.baseline = {a.baseline.substr(0, slash), a.baseline.substr(slash + 1)};
  Result<std::vector<TokenId>> ids = eval_load_ids(c.model_path, a.text, a.ids);
  if (!ids.is_ok()) return fail(ids.status().message());
  ThreadPool pool(a.threads);
  Result<EvalReport> report = run_eval(c, ids.value(), &pool, [](const std::string& line) {
    std::fprintf(stderr, "densa eval: %s\n", line.c_str());
  });
  if (!report.is_ok()) return fail(report.status().message());
  std::cout << eval_table(report.value()) << std::flush;
  if (!a.json_out.empty() && !write_file(a.json_out, eval_json(report.value()).dump(1) + "\n")) {
    return fail(a.json_out + ": cannot write");
  }
  if (!a.markdown_out.empty() && !write_file(a.markdown_out, eval_markdown(report.value()))) {
    return fail(a.markdown_out + ": cannot write");
  }
  return 0;
}

const CommandRegistrar kRegister([](CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  EvalConfig& c = args->config;
  CLI::App* cmd = app.add_subcommand("eval", "perplexity and KL divergence of precision choices vs a baseline");
  cmd->add_option("-m,--model", c.model_path, "GGUF file or Hugging Face directory (default: the MoE fixture)");
  cmd->add_option("--text", args->text, "text file (tokenized with the model's tokenizer, BOS first)");
  cmd->add_option("--ids", args->ids, "token ids as uint16 LE (e.g. golden/valid.ids.u16.bin)");
  cmd->add_option("--weights", c.weights,
                  "weight formats: native,f32,bf16,fp8,int4,int4-g32,int4-g128,q8_0,q4_0 for the body matrices "
                  "(int4 = g128), each optionally with +head-FORMAT for lm_head (e.g. int4-g32+head-fp8; "
                  "default: lm_head as stored), then optionally +int4-rows|tiles8|tiles16 (how INT4 g32 / Q4_0 "
                  "matrices are held, which decides their kernel's rounding; default: the kernels' choice), "
                  "and +x-f32 at the end to keep BF16 matrices on fp32 "
                  "activations (default: x rounded to bf16 on AMX tiles where the CPU has them)")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--kv", c.kv, "KV cache formats: f32,bf16,fp8,fp8-dynamic")->delimiter(',')->capture_default_str();
  cmd->add_option("--baseline", args->baseline, "WEIGHTS/KV combination the others are compared to (default: BF16 weights with fp32 "
                  "activations, BF16 KV)")
      ->capture_default_str();
  cmd->add_option("--ctx", c.ctx, "window length in tokens")->check(CLI::Range(4, 1 << 20))->capture_default_str();
  cmd->add_option("--max-windows", c.max_windows, "evaluate at most this many windows (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--bootstrap", c.bootstrap_resamples, "resamples for the delta-PPL CI")
      ->check(CLI::Range(0, 1000000))->capture_default_str();
  cmd->add_option("--seed", c.seed, "bootstrap seed")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "worker threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--json", args->json_out, "write the results as JSON");
  cmd->add_option("--markdown", args->markdown_out, "write the results as Markdown tables");
  cmd->callback([args] {
    if (int rc = run_eval_cmd(*args); rc != 0) throw CLI::RuntimeError(rc);
  });
});

}  // namespace
}  // namespace densa::cli
