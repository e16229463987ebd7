// `densa gen-model [--preset P] [--arch ...] [--hidden H] ... --dtype D [--lm-head-dtype D]
// [--format gguf|hf] [--tokenizer none|bytes|DIR] OUT`:
// writes a random-weight checkpoint of any shape (tools/model_files/gen_model.h) and prints its parameter
// counts. Flags given next to --preset override the preset's values.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "tools/model_files/gen_model.h"

namespace densa::cli {
namespace {

struct GenModelArgs {
  GenModelOptions opts;
  std::string preset;
  std::string output;
  std::vector<std::pair<CLI::Option*, int GenModelOptions::*>> shape_flags;
  CLI::Option* arch_flag = nullptr;
};

void draw_bar(int done, int total) {
  if (done != total && done % 16 != 0) return;
  std::fprintf(stderr, "\r%d/%d tensors", done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

int run_gen_model(GenModelArgs& a) {
  GenModelOptions o = a.opts;
  if (!a.preset.empty()) {
    if (Status s = apply_gen_model_preset(a.preset, o); !s.is_ok()) {
      std::fprintf(stderr, "densa gen-model: %s\n", s.message().c_str());
      return 1;
    }
    for (const auto& [flag, field] : a.shape_flags) {
      if (flag->count() > 0) o.*field = a.opts.*field;
    }
    if (a.arch_flag->count() > 0) o.arch = a.opts.arch;
  }
  o.output = a.output;
  Result<GenModelReport> r = generate_model(o, draw_bar);
  if (!r.is_ok()) {
    std::fprintf(stderr, "densa gen-model: %s\n", r.status().message().c_str());
    return 1;
  }
  const GenModelReport& g = r.value();
  const ModelConfig& c = g.config;
  const std::string head = o.lm_head_dtype.empty() ? "" : ", lm_head " + o.lm_head_dtype;
  std::printf("wrote %s (%s, %s%s): %s, hidden %d, %d layers, %d heads / %d kv heads, ffn %d",
              o.output.string().c_str(), o.format.c_str(), o.dtype.c_str(), head.c_str(), c.architecture.c_str(), c.hidden_size, c.num_layers, c.num_heads,
              c.num_kv_heads, c.intermediate_size);
  if (c.architecture == "MixtralForCausalLM") {
    std::printf(" x %d experts (top-%d)", c.num_experts, c.num_experts_per_tok);
  } else if (c.is_moe()) {
    std::printf(", %d experts of ffn %d (top-%d)", c.num_experts, c.moe_intermediate_size, c.num_experts_per_tok);
  }
  std::printf(", vocab %d, context %d\n", c.vocab_size, c.max_position_embeddings);
  std::printf("parameters: total %lld (%.1fM), active per token %lld (%.1fM); tensor bytes %lld\n",
              static_cast<long long>(g.total_params), g.total_params / 1e6, static_cast<long long>(g.active_params),
              g.active_params / 1e6, static_cast<long long>(g.bytes_written));
  return 0;
}

const CommandRegistrar kRegister([](CLI::App& app) {
  auto a = std::make_shared<GenModelArgs>();
  GenModelOptions& o = a->opts;
  CLI::App* cmd = app.add_subcommand(
      "gen-model", "write a random-weight Llama / Mixtral / Qwen3-MoE / DeepSeek-V3 checkpoint of any shape");
  cmd->add_option("output", a->output, ".gguf file (--format gguf) or directory (--format hf)")->required();
  cmd->add_option("--preset", a->preset, "dense-336m | moe-959m-a336m (other shape flags override it)");
  a->arch_flag = cmd->add_option("--arch", o.arch,
                                 "llama | mixtral | qwen3_moe (q/k norm, softmax top-k, no shared expert) | "
                                 "deepseek_v3 (MLA, leading dense layers, shared experts, sigmoid grouped routing)")
                      ->capture_default_str();
  auto shape = [&](const char* name, int GenModelOptions::*field, const char* help) {
    a->shape_flags.emplace_back(cmd->add_option(name, o.*field, help), field);
  };
  shape("--hidden", &GenModelOptions::hidden_size, "hidden size");
  shape("--layers", &GenModelOptions::num_layers, "decoder layers");
  shape("--heads", &GenModelOptions::num_heads, "attention heads");
  shape("--kv-heads", &GenModelOptions::num_kv_heads, "KV heads (GQA; not deepseek_v3)");
  shape("--head-dim", &GenModelOptions::head_dim, "head dim (default hidden / heads; not deepseek_v3)");
  shape("--ffn", &GenModelOptions::intermediate_size,
        "dense FFN width (per expert for mixtral; deepseek_v3: its leading dense layers)");
  shape("--experts", &GenModelOptions::num_experts, "routed experts (mixtral, qwen3_moe, deepseek_v3)");
  shape("--top-k", &GenModelOptions::num_experts_per_tok, "experts per token");
  shape("--moe-ffn", &GenModelOptions::moe_intermediate_size,
        "per-expert width, qwen3_moe / deepseek_v3 (default --ffn)");
  shape("--shared-experts", &GenModelOptions::num_shared_experts, "deepseek_v3: n_shared_experts (default 1)");
  shape("--dense-layers", &GenModelOptions::first_k_dense_replace,
        "deepseek_v3: first_k_dense_replace, leading dense layers (default 1)");
  shape("--expert-groups", &GenModelOptions::n_group, "deepseek_v3: n_group (default 1)");
  shape("--topk-groups", &GenModelOptions::topk_group, "deepseek_v3: topk_group (default 1)");
  shape("--q-lora-rank", &GenModelOptions::q_lora_rank, "deepseek_v3: q_lora_rank (default hidden / 2; 0 = q_proj)");
  shape("--kv-lora-rank", &GenModelOptions::kv_lora_rank, "deepseek_v3: kv_lora_rank (default hidden / 4)");
  shape("--qk-nope-dim", &GenModelOptions::qk_nope_head_dim, "deepseek_v3: qk_nope_head_dim (default hidden / heads)");
  shape("--qk-rope-dim", &GenModelOptions::qk_rope_head_dim, "deepseek_v3: qk_rope_head_dim (default nope / 2)");
  shape("--v-head-dim", &GenModelOptions::v_head_dim, "deepseek_v3: v_head_dim (default nope)");
  cmd->add_option("--routed-scale", o.routed_scaling_factor, "deepseek_v3: routed_scaling_factor")
      ->capture_default_str();
  shape("--vocab", &GenModelOptions::vocab_size, "vocabulary size (default 32000)");
  shape("--max-context", &GenModelOptions::max_context, "max_position_embeddings (default 8192)");
  cmd->add_option("--dtype", o.dtype, "f32 | f16 | bf16 | q8_0 | q4_0 (gguf) | fp8 | int4 (hf)")->capture_default_str();
  cmd->add_option("--lm-head-dtype", o.lm_head_dtype,
                  "lm_head's dtype (default: hf the float type, gguf --dtype): hf: f32 | f16 | bf16 or the --dtype "
                  "format (fp8, int4); gguf: f32 | f16 | bf16 | q8_0 | q4_0");
  cmd->add_option("--group-size", o.group_size, "INT4 group size: 32 or 128")->check(CLI::IsMember({32, 128}))
      ->capture_default_str();
  cmd->add_option("--format", o.format, "gguf | hf")->capture_default_str();
  cmd->add_option("--tokenizer", o.tokenizer,
                  "none | bytes: a byte-level vocabulary in the GGUF, so llama.cpp loads the file and text "
                  "commands run | DIR: a real tokenizer (tokenizer.json or tiktoken.model, with its configs and "
                  "chat template), the vocabulary size taken from it: copied into an --format hf checkpoint, "
                  "written as tokenizer.ggml.* and tokenizer.chat_template into a GGUF")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "random seed")->capture_default_str();
  cmd->callback([a] {
    if (int rc = run_gen_model(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
});

}  // namespace
}  // namespace densa::cli
