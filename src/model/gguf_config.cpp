#include "model/gguf_config.h"

#include <cmath>

namespace densa {
namespace {

// llama.cpp's expert_gating_func values.
constexpr int64_t kGatingSoftmax = 1;
constexpr int64_t kGatingSigmoid = 2;

// Reads "{arch}.<key>" with the file's name in every error.
class Meta {
 public:
  Meta(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)), file_(f.path().string()) {}

  std::string key(const std::string& k) const { return arch_ + "." + k; }
  bool has(const std::string& k) const { return f_.find(key(k)) != nullptr; }

  Result<int> required(const std::string& k) const {
    const auto v = f_.get_int(key(k));
    if (!v) return invalid_argument(file_ + ": missing integer metadata '" + key(k) + "'");
    return in_range(k, *v);
  }
  Result<int> optional(const std::string& k, int fallback) const {
    const auto v = f_.get_int(key(k));
    if (!v) return fallback;
    return in_range(k, *v);
  }
  double real(const std::string& k, double fallback) const { return f_.get_float(key(k)).value_or(fallback); }
  bool flag(const std::string& k, bool fallback) const { return f_.get_bool(key(k)).value_or(fallback); }

  Status bad(const std::string& what) const { return invalid_argument(file_ + ": " + what); }

 private:
  Result<int> in_range(const std::string& k, int64_t v) const {
    if (v < 0 || v > INT32_MAX) return invalid_argument(file_ + ": metadata '" + key(k) + "' out of range");
    return static_cast<int>(v);
  }
  const GgufFile& f_;
  std::string arch_, file_;
};

Status check_groups(const ModelConfig& c, const Meta& m) {
  const int group_size = c.n_group > 0 ? c.num_experts / c.n_group : 0;
  if (c.n_group <= 0 || c.num_experts % c.n_group != 0 || group_size < 2 || c.topk_group <= 0 ||
      c.topk_group > c.n_group || c.topk_group * group_size < c.num_experts_per_tok) {
    return m.bad("expert_group_count " + std::to_string(c.n_group) + " / expert_group_used_count " +
                 std::to_string(c.topk_group) + " do not fit " + std::to_string(c.num_experts) + " experts with top-" +
                 std::to_string(c.num_experts_per_tok));
  }
  return Status::ok();
}

// Sigmoid grouped routing (glm4moe, deepseek2): gating function, groups, scale, shared experts.
Status read_sigmoid_moe(const Meta& m, int default_shared, bool default_norm, ModelConfig& c) {
  const int64_t gating = static_cast<int64_t>(m.real("expert_gating_func", 0));
  if (gating != kGatingSigmoid) {
    return unimplemented(m.key("expert_gating_func") + " is " +
                         (m.has("expert_gating_func") ? std::to_string(gating) : std::string("absent (softmax)")) +
                         "; densa supports sigmoid routing (2) with a correction bias for this architecture");
  }
  c.moe_routing = MoeRouting::kSigmoidGrouped;
  DENSA_ASSIGN_OR_RETURN(c.n_group, m.optional("expert_group_count", 1));
  DENSA_ASSIGN_OR_RETURN(c.topk_group, m.optional("expert_group_used_count", 1));
  DENSA_ASSIGN_OR_RETURN(c.first_k_dense_replace, m.optional("leading_dense_block_count", 0));
  DENSA_ASSIGN_OR_RETURN(const int n_shared, m.optional("expert_shared_count", default_shared));
  c.shared_expert_intermediate_size = n_shared * c.moe_intermediate_size;
  c.routed_scaling_factor = static_cast<float>(m.real("expert_weights_scale", 1.0));
  c.norm_topk_prob = m.flag("expert_weights_norm", default_norm);
  return check_groups(c, m);
}

// deepseek2: MLA dims (both the current "MQA" form, where key_length is kv_lora_rank + rope
// and the per-head dims are in key_length_mla / value_length_mla, and the older form, where
// key_length / value_length are the per-head dims), YaRN.
Status read_deepseek2(const GgufFile& f, const Meta& m, ModelConfig& c) {
  MlaConfig& mla = c.mla;
  DENSA_ASSIGN_OR_RETURN(mla.q_lora_rank, m.optional("attention.q_lora_rank", 0));
  DENSA_ASSIGN_OR_RETURN(mla.kv_lora_rank, m.required("attention.kv_lora_rank"));
  DENSA_ASSIGN_OR_RETURN(mla.qk_rope_head_dim, m.required("rope.dimension_count"));
  const bool mqa_form = m.has("attention.key_length_mla");
  DENSA_ASSIGN_OR_RETURN(const int qk_dim, m.required(mqa_form ? "attention.key_length_mla" : "attention.key_length"));
  DENSA_ASSIGN_OR_RETURN(mla.v_head_dim,
                         m.required(mqa_form ? "attention.value_length_mla" : "attention.value_length"));
  mla.qk_nope_head_dim = qk_dim - mla.qk_rope_head_dim;
  mla.rope_interleave = true;  // llama.cpp's deepseek2 RoPE rotates adjacent pairs, as the checkpoints store
  if (mla.kv_lora_rank <= 0 || mla.qk_nope_head_dim <= 0 || mla.qk_rope_head_dim <= 0 ||
      mla.qk_rope_head_dim % 2 != 0 || mla.v_head_dim <= 0) {
    return m.bad("MLA needs positive kv_lora_rank, nope and v head dims and an even rope.dimension_count");
  }
  c.head_dim = qk_dim;
  c.num_kv_heads = c.num_heads;
  DENSA_RETURN_IF_ERROR(read_sigmoid_moe(m, 0, false, c));
  const std::string scaling = f.get_string(m.key("rope.scaling.type")).value_or("none");
  if (scaling == "yarn") {
    c.yarn.factor = static_cast<float>(m.real("rope.scaling.factor", 0.0));
    DENSA_ASSIGN_OR_RETURN(c.yarn.original_max_position_embeddings,
                           m.required("rope.scaling.original_context_length"));
    c.yarn.beta_fast = static_cast<float>(m.real("rope.scaling.yarn_beta_fast", 32.0));
    c.yarn.beta_slow = static_cast<float>(m.real("rope.scaling.yarn_beta_slow", 1.0));
    c.yarn.mscale = 1.0f;  // llama.cpp's deepseek2 assumes mscale 1 (DeepSeek-V3, Kimi K2)
    // deepseek2 stores 0.1 * mscale_all_dim as the log multiplier.
    c.yarn.mscale_all_dim = static_cast<float>(m.real("rope.scaling.yarn_log_multiplier", 0.0) / 0.1);
    if (!(c.yarn.factor >= 1.0f) || !(c.yarn.beta_fast > 0) || !(c.yarn.beta_slow > 0)) {
      return m.bad("YaRN needs rope.scaling.factor >= 1 and positive betas");
    }
  } else if (scaling != "none") {
    return unimplemented(f.path().string() + ": rope.scaling.type '" + scaling + "' (supported: yarn, none)");
  }
  return Status::ok();
}

// glm-dsa: the lightning indexer's shape and top-k (llama.cpp's attention.indexer.* keys). The
// file's indexer tensors use MLA's RoPE layout, as every glm_moe_dsa densa loads does.
Status read_dsa_indexer(const Meta& m, ModelConfig& c) {
  DsaConfig& d = c.dsa;
  DENSA_ASSIGN_OR_RETURN(d.index_n_heads, m.required("attention.indexer.head_count"));
  DENSA_ASSIGN_OR_RETURN(d.index_head_dim, m.required("attention.indexer.key_length"));
  DENSA_ASSIGN_OR_RETURN(d.index_topk, m.required("attention.indexer.top_k"));
  if (c.mla.q_lora_rank <= 0) return m.bad("DSA's indexer reads q_lora_rank's latent; attention.q_lora_rank is missing");
  if (d.index_topk <= 0 || d.index_n_heads <= 0 || d.index_head_dim <= c.mla.qk_rope_head_dim) {
    return m.bad("DSA needs positive attention.indexer.top_k and head_count, and key_length above "
                 "rope.dimension_count");
  }
  return Status::ok();
}

}  // namespace

std::string gguf_blk(int layer, const std::string& part) {
  return "blk." + std::to_string(layer) + "." + part + ".weight";
}

Result<std::string> gguf_arch_name(const ModelConfig& c) {
  if (c.architecture == "Qwen3MoeForCausalLM") return std::string("qwen3moe");
  if (c.architecture == "Qwen2MoeForCausalLM") return std::string("qwen2moe");
  if (c.architecture == "Glm4MoeForCausalLM") return std::string("glm4moe");
  // Kimi K2.5 / K2.6 text models and GLM-4.7-Flash run the DeepSeek-V3 forward: llama.cpp writes
  // them as deepseek2 (they load back as DeepseekV3ForCausalLM). GLM-5's DSA is llama.cpp's glm-dsa.
  if (c.architecture == "DeepseekV3ForCausalLM" || c.architecture == "KimiK25ForConditionalGeneration" ||
      c.architecture == "Glm4MoeLiteForCausalLM") {
    return std::string("deepseek2");
  }
  if (c.architecture == "GlmMoeDsaForCausalLM") return std::string("glm-dsa");
  if (c.architecture == "LlamaForCausalLM" || c.architecture == "MixtralForCausalLM") return std::string("llama");
  return unimplemented("architecture '" + c.architecture + "' has no GGUF name in densa");
}

Result<ModelConfig> gguf_model_config(const GgufFile& f) {
  const std::string fname = f.path().string();
  const auto arch = f.get_string("general.architecture");
  if (!arch) return invalid_argument(fname + ": missing metadata 'general.architecture'");
  const std::string& a = *arch;
  if (a != "llama" && a != "qwen3moe" && a != "qwen2moe" && a != "glm4moe" && a != "deepseek2" && a != "glm-dsa") {
    return unimplemented(fname + ": unsupported GGUF architecture '" + a +
                         "' (supported: llama, qwen3moe, qwen2moe, glm4moe, deepseek2, glm-dsa)");
  }
  const Meta m(f, a);
  ModelConfig c;
  DENSA_ASSIGN_OR_RETURN(const int block_count, m.required("block_count"));
  DENSA_ASSIGN_OR_RETURN(const int nextn, m.optional("nextn_predict_layers", 0));  // MTP layers: not run
  c.num_layers = block_count - nextn;
  c.num_nextn_layers = nextn;
  DENSA_ASSIGN_OR_RETURN(c.hidden_size, m.required("embedding_length"));
  DENSA_ASSIGN_OR_RETURN(c.num_heads, m.required("attention.head_count"));
  if (a == "llama") {
    DENSA_ASSIGN_OR_RETURN(c.intermediate_size, m.required("feed_forward_length"));
  } else {
    DENSA_ASSIGN_OR_RETURN(c.intermediate_size, m.optional("feed_forward_length", 0));
  }
  if (c.num_layers <= 0 || c.hidden_size <= 0 || c.num_heads <= 0) {
    return m.bad("block_count, embedding_length and attention.head_count must be positive (after " +
                 std::to_string(nextn) + " nextn layers)");
  }
  DENSA_ASSIGN_OR_RETURN(c.num_kv_heads, m.optional("attention.head_count_kv", c.num_heads));
  DENSA_ASSIGN_OR_RETURN(c.head_dim, m.optional("attention.key_length", c.hidden_size / c.num_heads));
  DENSA_ASSIGN_OR_RETURN(c.max_position_embeddings, m.optional("context_length", 2048));
  c.rope_theta = static_cast<float>(m.real("rope.freq_base", 10000.0));
  c.rms_norm_eps = static_cast<float>(m.real("attention.layer_norm_rms_epsilon", 1e-5));
  DENSA_ASSIGN_OR_RETURN(c.num_experts, a == "llama" ? m.optional("expert_count", 0) : m.required("expert_count"));
  DENSA_ASSIGN_OR_RETURN(c.num_experts_per_tok,
                         a == "llama" ? m.optional("expert_used_count", 0) : m.required("expert_used_count"));
  if (c.num_experts > 0 && (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts)) {
    return m.bad("need 0 < " + m.key("expert_used_count") + " <= " + m.key("expert_count"));
  }
  if (a == "llama") {
    c.architecture = c.num_experts > 0 ? "MixtralForCausalLM" : "LlamaForCausalLM";
    c.moe_intermediate_size = c.num_experts > 0 ? c.intermediate_size : 0;
  } else {
    DENSA_ASSIGN_OR_RETURN(c.moe_intermediate_size, m.required("expert_feed_forward_length"));
    if (c.moe_intermediate_size <= 0) return m.bad(m.key("expert_feed_forward_length") + " must be positive");
  }
  const bool has_bias = f.has_tensor("blk.0.attn_q.bias");
  if (a == "qwen3moe" || a == "qwen2moe") {
    c.architecture = a == "qwen3moe" ? "Qwen3MoeForCausalLM" : "Qwen2MoeForCausalLM";
    // llama.cpp renormalises the top-k weights of qwen3moe and never those of qwen2moe.
    c.norm_topk_prob = m.flag("expert_weights_norm", a == "qwen3moe");
    c.qk_norm = a == "qwen3moe";
    c.attention_bias = a == "qwen2moe" || has_bias;
    if (a == "qwen2moe") {
      DENSA_ASSIGN_OR_RETURN(c.shared_expert_intermediate_size, m.required("expert_shared_feed_forward_length"));
      c.shared_expert_gate = c.shared_expert_intermediate_size > 0;
    }
    for (int i = 0; i < c.num_layers; ++i) {
      if (!f.has_tensor(gguf_blk(i, "ffn_gate_inp"))) c.mlp_only_layers.push_back(i);
    }
  }
  if (a == "glm4moe") {
    c.architecture = "Glm4MoeForCausalLM";
    c.attention_bias = has_bias;
    c.qk_norm = f.has_tensor("blk.0.attn_q_norm.weight");
    DENSA_ASSIGN_OR_RETURN(c.rotary_dim, m.optional("rope.dimension_count", c.head_dim));
    if (c.rotary_dim <= 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0) {
      return m.bad(m.key("rope.dimension_count") + " " + std::to_string(c.rotary_dim) +
                   " is not an even number of dims within head_dim " + std::to_string(c.head_dim));
    }
    if (c.rotary_dim == c.head_dim) c.rotary_dim = 0;
    DENSA_RETURN_IF_ERROR(read_sigmoid_moe(m, 1, true, c));
  }
  if (a == "deepseek2") {
    c.architecture = "DeepseekV3ForCausalLM";
    DENSA_RETURN_IF_ERROR(read_deepseek2(f, m, c));
  }
  if (a == "glm-dsa") {
    c.architecture = "GlmMoeDsaForCausalLM";
    DENSA_RETURN_IF_ERROR(read_deepseek2(f, m, c));
    DENSA_RETURN_IF_ERROR(read_dsa_indexer(m, c));
  }
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 || c.head_dim <= 0 || c.head_dim % 2 != 0) {
    return m.bad("inconsistent attention metadata (heads " + std::to_string(c.num_heads) + ", kv heads " +
                 std::to_string(c.num_kv_heads) + ", head_dim " + std::to_string(c.head_dim) + ")");
  }
  for (int i = 0; i < c.num_layers; ++i) {
    if (!c.is_moe_layer(i) && c.intermediate_size <= 0) {
      return m.bad("layer " + std::to_string(i) + " is dense but " + m.key("feed_forward_length") + " is missing");
    }
  }
  if (auto v = m.optional("vocab_size", 0); v.is_ok() && *v > 0) {
    c.vocab_size = *v;
  } else if (auto tokens = f.find("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<int>(tokens->strings.size());
  } else if (auto t = f.tensor("token_embd.weight"); t.is_ok() && t->ne.size() == 2) {
    c.vocab_size = static_cast<int>(t->ne[1]);
  }
  if (c.vocab_size <= 0) return invalid_argument(fname + ": cannot determine the vocabulary size");
  c.tie_word_embeddings = !f.has_tensor("output.weight");
  c.bos_token_id = static_cast<TokenId>(f.get_int("tokenizer.ggml.bos_token_id").value_or(1));
  c.eos_token_id = static_cast<TokenId>(f.get_int("tokenizer.ggml.eos_token_id").value_or(2));
  return c;
}

Result<std::vector<std::pair<std::string, GgufValue>>> gguf_model_metadata(const ModelConfig& c,
                                                                           uint32_t file_type) {
  DENSA_ASSIGN_OR_RETURN(const std::string a, gguf_arch_name(c));
  if (a == "llama") {
    return unimplemented("writing " + c.architecture + " as GGUF is not supported here (it needs llama.cpp's "
                         "permuted Q/K rows; `densa gen-model --format gguf` writes such files)");
  }
  std::vector<std::pair<std::string, GgufValue>> out;
  auto add = [&](const std::string& key, GgufType type, int64_t i, double r, const std::string& s = "") {
    GgufValue v;
    v.type = type;
    v.integer = i;
    v.real = r;
    v.str = s;
    out.emplace_back(key, std::move(v));
  };
  auto u32 = [&](const std::string& k, int64_t v) { add(a + "." + k, GgufType::kU32, v, 0); };
  auto f32 = [&](const std::string& k, double v) { add(a + "." + k, GgufType::kF32, 0, v); };
  auto flag = [&](const std::string& k, bool v) { add(a + "." + k, GgufType::kBool, v ? 1 : 0, 0); };
  add("general.architecture", GgufType::kString, 0, 0, a);
  add("general.file_type", GgufType::kU32, file_type, 0);
  u32("block_count", c.num_layers);
  u32("context_length", c.max_position_embeddings);
  u32("embedding_length", c.hidden_size);
  u32("feed_forward_length", c.intermediate_size);
  u32("vocab_size", c.vocab_size);
  u32("attention.head_count", c.num_heads);
  f32("attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  f32("rope.freq_base", c.rope_theta);
  u32("expert_count", c.num_experts);
  u32("expert_used_count", c.num_experts_per_tok);
  u32("expert_feed_forward_length", c.moe_intermediate_size);
  flag("expert_weights_norm", c.norm_topk_prob);
  if (c.moe_routing == MoeRouting::kSigmoidGrouped) {
    u32("expert_gating_func", kGatingSigmoid);
    u32("expert_group_count", c.n_group);
    u32("expert_group_used_count", c.topk_group);
    // GGUF says only how many layers lead dense (first_k_dense_replace, or GLM's
    // mlp_layer_types); a dense layer after a MoE one has no key.
    int leading = 0;
    while (leading < c.num_layers && !c.is_moe_layer(leading)) ++leading;
    for (int l = leading; l < c.num_layers; ++l) {
      if (!c.is_moe_layer(l)) {
        return unimplemented(a + " GGUF has only leading dense layers (leading_dense_block_count); layer " +
                             std::to_string(l) + " is dense after MoE layer " + std::to_string(leading));
      }
    }
    u32("leading_dense_block_count", leading);
    const int n_shared = c.moe_intermediate_size > 0 ? c.shared_expert_intermediate_size / c.moe_intermediate_size : 0;
    u32("expert_shared_count", n_shared);
    f32("expert_weights_scale", c.routed_scaling_factor);
    u32("nextn_predict_layers", 0);
  } else {
    u32("expert_gating_func", kGatingSoftmax);
  }
  if (c.shared_expert_gate) u32("expert_shared_feed_forward_length", c.shared_expert_intermediate_size);
  if (c.is_mla()) {
    const MlaConfig& m = c.mla;
    if (!m.rope_interleave) {
      return unimplemented(a + " GGUF keeps q_pe / k_pe interleaved; a checkpoint with rope_interleave "
                           "false would need its rows permuted, which densa does not do");
    }
    // llama.cpp runs MLA as MQA over the latent: one KV head of kv_lora_rank + rope dims.
    u32("attention.head_count_kv", 1);
    u32("attention.key_length", m.kv_lora_rank + m.qk_rope_head_dim);
    u32("attention.value_length", m.kv_lora_rank);
    u32("attention.key_length_mla", m.qk_nope_head_dim + m.qk_rope_head_dim);
    u32("attention.value_length_mla", m.v_head_dim);
    if (m.q_lora_rank > 0) u32("attention.q_lora_rank", m.q_lora_rank);
    u32("attention.kv_lora_rank", m.kv_lora_rank);
    u32("rope.dimension_count", m.qk_rope_head_dim);
    if (c.is_dsa()) {
      u32("attention.indexer.head_count", c.dsa.index_n_heads);
      u32("attention.indexer.key_length", c.dsa.index_head_dim);
      u32("attention.indexer.top_k", c.dsa.index_topk);
    }
    if (c.yarn.factor > 0.0f) {
      if (c.yarn.mscale != 1.0f) {
        return unimplemented("YaRN mscale " + std::to_string(c.yarn.mscale) +
                             " cannot be stored in " + a + " GGUF metadata (llama.cpp assumes 1)");
      }
      add(a + ".rope.scaling.type", GgufType::kString, 0, 0, "yarn");
      f32("rope.scaling.factor", c.yarn.factor);
      u32("rope.scaling.original_context_length", c.yarn.original_max_position_embeddings);
      f32("rope.scaling.yarn_beta_fast", c.yarn.beta_fast);
      f32("rope.scaling.yarn_beta_slow", c.yarn.beta_slow);
      f32("rope.scaling.yarn_log_multiplier", 0.1 * static_cast<double>(c.yarn.mscale_all_dim));
    }
  } else {
    u32("attention.head_count_kv", c.num_kv_heads);
    u32("attention.key_length", c.head_dim);
    u32("attention.value_length", c.head_dim);
    u32("rope.dimension_count", c.rope_dim());
  }
  add("tokenizer.ggml.bos_token_id", GgufType::kU32, c.bos_token_id, 0);
  add("tokenizer.ggml.eos_token_id", GgufType::kU32, c.eos_token_id, 0);
  return out;
}

}  // namespace densa
