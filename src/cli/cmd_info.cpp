// `densa info`: what a model file holds.
#include <cstdio>
#include <map>
#include <memory>

#include "cli/command.h"
#include "cli/model_path.h"
#include "io/gguf_file.h"
#include "model/hf_tensor_inventory.h"
#include "model/model_loader.h"

namespace densa::cli {
namespace {

// Elements per matrix dtype, and the bytes of the FP8 / INT4 scales held beside them.
void count(std::map<std::string, int64_t>& by_dtype, int64_t& scale_bytes, const WeightView& w) {
  if (w.empty()) return;
  by_dtype[std::string(dtype_name(w.dtype))] += w.rows * w.cols;
  scale_bytes += w.scale_bytes();
}

// "attn_q" for "blk.3.attn_q.weight", "token_embd" for "token_embd.weight".
std::string tensor_group(std::string name) {
  if (name.size() > 7 && name.ends_with(".weight")) name.resize(name.size() - 7);
  if (name.rfind("blk.", 0) == 0) {
    const size_t dot = name.find('.', 4);
    if (dot != std::string::npos) return name.substr(dot + 1);
  }
  return name;
}

// Per tensor group of a GGUF (as stored, before any conversion at load): how many tensors,
// in which ggml types, and the group's bits per weight.
void print_gguf_formats(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f.is_ok()) return;
  struct Group {
    int tensors = 0;
    std::map<std::string, int> types;
    int64_t elems = 0, bytes = 0;
    bool unknown = false;
  };
  std::map<std::string, Group> groups;
  for (const GgufTensorInfo& t : f->tensor_infos()) {
    Group& g = groups[tensor_group(t.name)];
    ++g.tensors;
    ++g.types[ggml_type_name(t.ggml_type)];
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    const auto block = ggml_type_block(t.ggml_type);
    if (!block) {
      g.unknown = true;
      continue;
    }
    g.elems += n;
    g.bytes += n / block->first * block->second;
  }
  std::printf("tensor formats (as stored; group: tensors, types, bits per weight):\n");
  for (const auto& [name, g] : groups) {
    std::string types;
    for (const auto& [t, n] : g.types) types += (types.empty() ? "" : ", ") + t + (g.types.size() > 1 ? " x" + std::to_string(n) : "");
    if (g.unknown) {
      std::printf("  %-22s %4d  %-28s (a type of unknown layout)\n", name.c_str(), g.tensors, types.c_str());
    } else {
      std::printf("  %-22s %4d  %-28s %6.3f bpw\n", name.c_str(), g.tensors, types.c_str(),
                  8.0 * static_cast<double>(g.bytes) / static_cast<double>(g.elems));
    }
  }
}

int run_info(const std::string& model) {
  const std::string path = model.empty() ? default_model_path() : model;
  Result<ModelWeights> loaded = load_model(path, LoadOptions{.prepare_for_kernels = false});  // as stored
  if (!loaded.is_ok()) {
    std::fprintf(stderr, "densa info: %s\n", loaded.status().message().c_str());
    return 1;
  }
  const ModelWeights& w = loaded.value();
  const ModelConfig& c = w.config;
  std::map<std::string, int64_t> by_dtype;
  int64_t scale_bytes = 0;
  count(by_dtype, scale_bytes, w.tok_embeddings);
  count(by_dtype, scale_bytes, w.lm_head);
  for (const LayerWeights& l : w.layers) {
    for (const WeightView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.shared_gate,
                                &l.shared_up, &l.shared_down, &l.q_a, &l.q_b, &l.kv_a, &l.kv_b, &l.idx_wq_b, &l.idx_wk,
                                &l.idx_weights_proj}) {
      count(by_dtype, scale_bytes, *m);
    }
    for (const auto* v : {&l.expert_gate, &l.expert_up, &l.expert_down})
      for (const WeightView& m : *v) count(by_dtype, scale_bytes, m);
  }
  std::printf("model:          %s (%s)\n", w.source.c_str(), w.format.c_str());
  std::printf("architecture:   %s (attention %s)\n", c.architecture.c_str(), c.attention_kind());
  std::printf("layers:         %d\n", c.num_layers);
  std::printf("nextn layers:   %d%s\n", c.num_nextn_layers, c.num_nextn_layers > 0 ? " (MTP, not loaded)" : "");
  std::printf("hidden:         %d\n", c.hidden_size);
  std::printf("heads:          %d (kv heads %d, head_dim %d)\n", c.num_heads, c.num_kv_heads, c.head_dim);
  std::printf("ffn:            %d%s\n", c.intermediate_size, c.is_moe() ? " per expert" : "");
  if (c.is_moe()) {
    int moe_layers = 0;
    for (int l = 0; l < c.num_layers; ++l) moe_layers += c.is_moe_layer(l);
    std::printf("experts:        %d (top-%d per token, %s routing), width %d, in %d of %d layers\n", c.num_experts,
                c.num_experts_per_tok, c.moe_routing == MoeRouting::kSoftmaxTopK ? "softmax" : "sigmoid grouped",
                c.moe_intermediate_size, moe_layers, c.num_layers);
    if (c.shared_expert_intermediate_size > 0) {
      std::printf("shared expert:  width %d%s\n", c.shared_expert_intermediate_size,
                  c.shared_expert_gate ? " (sigmoid gate)" : "");
    }
  }
  if (c.attention_bias || c.qk_norm || c.rope_dim() != c.head_dim) {
    std::printf("attention:      %s%s rope dims %d of %d\n", c.attention_bias ? "qkv bias, " : "",
                c.qk_norm ? "q/k norm," : "", c.rope_dim(), c.head_dim);
  }
  std::printf("vocab:          %d\n", c.vocab_size);
  std::printf("context:        %d\n", c.max_position_embeddings);
  std::printf("rope theta:     %g, rms eps %g\n", c.rope_theta, c.rms_norm_eps);
  if (c.is_mla()) {
    const MlaConfig& m = c.mla;
    std::printf("attention:      MLA, q_lora_rank %d, kv_lora_rank %d, qk_nope %d + qk_rope %d, v %d; "
                "KV cache: one latent row of %d values per token per layer\n",
                m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim,
                m.kv_lora_rank + m.qk_rope_head_dim);
  }
  if (c.is_dsa()) {
    std::printf("sparse attn:    DSA, lightning indexer %d heads x %d, each query attends to the top %d "
                "cached tokens\n",
                c.dsa.index_n_heads, c.dsa.index_head_dim, c.dsa.index_topk);
  }
  if (c.yarn.factor > 0.0f) {
    std::printf("rope scaling:   yarn, factor %g over %d positions, beta_fast %g, beta_slow %g, mscale %g, "
                "mscale_all_dim %g\n",
                c.yarn.factor, c.yarn.original_max_position_embeddings, c.yarn.beta_fast, c.yarn.beta_slow,
                c.yarn.mscale, c.yarn.mscale_all_dim);
  }
  std::printf("parameters:     %lld\n", static_cast<long long>(w.num_params()));
  std::printf("weight bytes:   %lld (of which scales %lld)\n", static_cast<long long>(w.weight_bytes()),
              static_cast<long long>(scale_bytes));
  std::printf("matrix dtypes: ");
  for (const auto& [name, n] : by_dtype) std::printf(" %s=%lld", name.c_str(), static_cast<long long>(n));
  std::printf("\ntokenizer:      %s\n", w.tokenizer ? "yes" : "none");
  if (w.format == "gguf") print_gguf_formats(path);
  const std::vector<std::string> skipped = describe_skipped(w.skipped, c);
  if (skipped.empty()) std::printf("skipped:        nothing\n");
  for (const std::string& line : skipped) std::printf("skipped:        %s\n", line.substr(8).c_str());
  return 0;
}

const CommandRegistrar kRegister([](CLI::App& app) {
  auto model = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "print what a model file holds");
  cmd->add_option("-m,--model", *model, "GGUF file or Hugging Face directory (default: the MoE fixture in models/)");
  cmd->callback([model] {
    if (int rc = run_info(*model); rc != 0) throw CLI::RuntimeError(rc);
  });
});

}  // namespace
}  // namespace densa::cli
