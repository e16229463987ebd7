// `densa quantize IN OUT --to fp8|int4|bf16|q8_0|q4_0|f16|f32 [--group-size 32|128]
// [--lm-head-dtype D]`: writes a quantized checkpoint, or a Hugging Face directory as GGUF
// when OUT ends in .gguf (tools/model_files/quantize.h), with a progress bar on stderr.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "tools/model_files/quantize.h"

namespace densa::cli {
namespace {

void draw_bar(int done, int total) {
  constexpr int kWidth = 40;
  const int filled = total > 0 ? done * kWidth / total : kWidth;
  std::fprintf(stderr, "\r[%.*s%*s] %d/%d tensors", filled, "========================================",
               kWidth - filled, "", done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

int run_quantize(const QuantizeOptions& opts) {
  Result<QuantizeReport> r = quantize_checkpoint(opts, draw_bar);
  if (!r.is_ok()) {
    std::fprintf(stderr, "densa quantize: %s\n", r.status().message().c_str());
    return 1;
  }
  const QuantizeReport& q = r.value();
  const std::string head = opts.lm_head.empty() ? "" : " (lm_head " + opts.lm_head + ")";
  std::printf("wrote %s: %d matrices quantized to %s%s, %d tensors kept; tensor bytes %lld -> %lld (%.3fx)\n",
              opts.output.string().c_str(), q.num_quantized, opts.to.c_str(), head.c_str(), q.num_kept,
              static_cast<long long>(q.input_weight_bytes), static_cast<long long>(q.output_weight_bytes),
              q.input_weight_bytes > 0 ? static_cast<double>(q.output_weight_bytes) / q.input_weight_bytes : 0.0);
  return 0;
}

const CommandRegistrar kRegister([](CLI::App& app) {
  auto opts = std::make_shared<QuantizeOptions>();
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("quantize", "write an FP8 / INT4 (Hugging Face) or Q8_0 / Q4_0 (GGUF) checkpoint, or a Hugging Face model as GGUF");
  cmd->add_option("input", *in, "Hugging Face directory or GGUF file")->required();
  cmd->add_option("output", *out, "output directory (Hugging Face) or .gguf file")->required();
  cmd->add_option("--to", opts->to, "fp8 | int4 | bf16 (Hugging Face in and out), q8_0 | q4_0 (GGUF in and out), f32 | f16 | bf16 | q8_0 | q4_0 (Hugging Face in, .gguf out)")
      ->required();
  cmd->add_option("--group-size", opts->group_size, "INT4 group size along the input dimension: 32 or 128")
      ->check(CLI::IsMember({32, 128}));
  cmd->add_option("--lm-head-dtype", opts->lm_head,
                  "quantize lm_head too (default: kept as stored): Hugging Face out: the --to format (fp8, or int4 "
                  "with --group-size) or bf16; GGUF out: q8_0 | q4_0 | bf16. A tied lm_head becomes its own tensor");
  cmd->callback([opts, in, out] {
    opts->input = *in;
    opts->output = *out;
    if (int rc = run_quantize(*opts); rc != 0) throw CLI::RuntimeError(rc);
  });
});

}  // namespace
}  // namespace densa::cli
