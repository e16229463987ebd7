#include "io/model_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace densa {
namespace {

using Json = nlohmann::json;

// Reads `key` as T into `out`; absent (or null) keeps the default unless `required`.
template <typename T>
Status read_key(const Json& j, const char* key, bool required, const std::string& origin, T& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return invalid_argument(origin + ": missing key '" + key + "'");
    return Status::ok();
  }
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return invalid_argument(origin + ": key '" + key + "' must be a boolean");
    out = it->get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return invalid_argument(origin + ": key '" + key + "' must be an integer");
    const int64_t v = it->get<int64_t>();
    if (v < 0 || v > INT32_MAX) return invalid_argument(origin + ": key '" + key + "' out of range: " + std::to_string(v));
    out = static_cast<T>(v);
  } else {
    if (!it->is_number()) return invalid_argument(origin + ": key '" + key + "' must be a number");
    out = it->get<T>();
  }
  return Status::ok();
}

// eos_token_id may be an int or a list of ints (the first one is used).
Status read_token_id(const Json& j, const char* key, const std::string& origin, TokenId& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  const Json& v = (it->is_array() && !it->empty()) ? (*it)[0] : *it;
  if (!v.is_number_integer()) return invalid_argument(origin + ": key '" + key + "' must be an integer");
  const int64_t id = v.get<int64_t>();  // an unsigned above INT64_MAX wraps negative: refused
  if (id < 0 || id > INT32_MAX) {
    return invalid_argument(origin + ": key '" + key + "' is not a valid token id: " + v.dump());
  }
  out = static_cast<TokenId>(id);
  return Status::ok();
}

// mlp_only_layers: a list of layer indices (absent or null = none).
Status read_layer_list(const Json& j, const char* key, const std::string& origin, int num_layers,
                       std::vector<int>& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return invalid_argument(origin + ": key '" + key + "' must be a list of layer indices");
  for (const Json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= num_layers) {
      return invalid_argument(origin + ": key '" + key + "' holds an invalid layer index " + v.dump());
    }
    out.push_back(v.get<int>());
  }
  return Status::ok();
}

Status check_experts(const ModelConfig& c, const std::string& origin, const char* experts_key) {
  if (c.num_experts <= 0 || c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts) {
    return invalid_argument(origin + ": need 0 < num_experts_per_tok <= " + experts_key);
  }
  if (c.moe_intermediate_size <= 0) return invalid_argument(origin + ": moe_intermediate_size must be positive");
  return Status::ok();
}

// n_shared shared experts of moe_intermediate_size each, as one FFN of their summed width.
Status shared_expert_width(int n_shared, ModelConfig& c, const std::string& origin) {
  const int64_t width = int64_t{n_shared} * c.moe_intermediate_size;
  if (width > INT32_MAX) {
    return invalid_argument(origin + ": n_shared_experts " + std::to_string(n_shared) + " x moe_intermediate_size " +
                            std::to_string(c.moe_intermediate_size) + " out of range");
  }
  c.shared_expert_intermediate_size = static_cast<int>(width);
  return Status::ok();
}

// Mixtral: every layer MoE, experts as wide as intermediate_size, softmax top-k renormalised.
Status parse_mixtral(const Json& j, const std::string& origin, ModelConfig& c) {
  DENSA_RETURN_IF_ERROR(read_key(j, "num_local_experts", true, origin, c.num_experts));
  DENSA_RETURN_IF_ERROR(read_key(j, "num_experts_per_tok", true, origin, c.num_experts_per_tok));
  c.moe_intermediate_size = c.intermediate_size;
  return check_experts(c, origin, "num_local_experts");
}

// Qwen3-MoE (q/k norm, optional attention_bias) and Qwen2-MoE (q/k/v bias, gated shared
// expert): softmax top-k, norm_topk_prob, decoder_sparse_step / mlp_only_layers.
Status parse_qwen_moe(const Json& j, const std::string& origin, bool qwen3, ModelConfig& c) {
  DENSA_RETURN_IF_ERROR(read_key(j, "num_experts", true, origin, c.num_experts));
  DENSA_RETURN_IF_ERROR(read_key(j, "num_experts_per_tok", true, origin, c.num_experts_per_tok));
  DENSA_RETURN_IF_ERROR(read_key(j, "moe_intermediate_size", true, origin, c.moe_intermediate_size));
  c.norm_topk_prob = false;  // the HF default for both
  DENSA_RETURN_IF_ERROR(read_key(j, "norm_topk_prob", false, origin, c.norm_topk_prob));
  DENSA_RETURN_IF_ERROR(read_key(j, "decoder_sparse_step", false, origin, c.decoder_sparse_step));
  if (c.decoder_sparse_step <= 0) return invalid_argument(origin + ": decoder_sparse_step must be positive");
  DENSA_RETURN_IF_ERROR(read_layer_list(j, "mlp_only_layers", origin, c.num_layers, c.mlp_only_layers));
  if (qwen3) {
    c.qk_norm = true;
    DENSA_RETURN_IF_ERROR(read_key(j, "attention_bias", false, origin, c.attention_bias));
  } else {
    c.attention_bias = true;  // Qwen2-MoE always has q/k/v bias
    DENSA_RETURN_IF_ERROR(
        read_key(j, "shared_expert_intermediate_size", true, origin, c.shared_expert_intermediate_size));
    c.shared_expert_gate = c.shared_expert_intermediate_size > 0;
  }
  return check_experts(c, origin, "num_experts");
}

// GLM-4.5: partial RoPE, optional q/k/v bias and q/k norm, sigmoid routing with correction
// bias and grouped top-k, routed_scaling_factor, n_shared_experts, leading dense layers.
Status parse_glm4_moe(const Json& j, const std::string& origin, ModelConfig& c) {
  const char* experts_key = j.contains("n_routed_experts") ? "n_routed_experts" : "num_experts";
  DENSA_RETURN_IF_ERROR(read_key(j, experts_key, true, origin, c.num_experts));
  DENSA_RETURN_IF_ERROR(read_key(j, "num_experts_per_tok", true, origin, c.num_experts_per_tok));
  DENSA_RETURN_IF_ERROR(read_key(j, "moe_intermediate_size", true, origin, c.moe_intermediate_size));
  c.moe_routing = MoeRouting::kSigmoidGrouped;
  c.first_k_dense_replace = 1;
  int n_shared = 1;
  double scaling = 1.0, partial = 0.5;
  DENSA_RETURN_IF_ERROR(read_key(j, "n_shared_experts", false, origin, n_shared));
  DENSA_RETURN_IF_ERROR(read_key(j, "first_k_dense_replace", false, origin, c.first_k_dense_replace));
  DENSA_RETURN_IF_ERROR(read_key(j, "n_group", false, origin, c.n_group));
  DENSA_RETURN_IF_ERROR(read_key(j, "topk_group", false, origin, c.topk_group));
  DENSA_RETURN_IF_ERROR(read_key(j, "norm_topk_prob", false, origin, c.norm_topk_prob));
  DENSA_RETURN_IF_ERROR(read_key(j, "routed_scaling_factor", false, origin, scaling));
  DENSA_RETURN_IF_ERROR(read_key(j, "partial_rotary_factor", false, origin, partial));
  DENSA_RETURN_IF_ERROR(read_key(j, "attention_bias", false, origin, c.attention_bias));
  DENSA_RETURN_IF_ERROR(read_key(j, "use_qk_norm", false, origin, c.qk_norm));
  DENSA_RETURN_IF_ERROR(check_experts(c, origin, experts_key));
  c.routed_scaling_factor = static_cast<float>(scaling);
  DENSA_RETURN_IF_ERROR(shared_expert_width(n_shared, c, origin));
  // partial is checked before the conversion: a double outside int's range has no int value.
  if (!(partial > 0.0 && partial <= 1.0)) {
    return invalid_argument(origin + ": partial_rotary_factor " + std::to_string(partial) + " must be in (0, 1]");
  }
  c.rotary_dim = static_cast<int>(c.head_dim * partial);
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0) {
    return invalid_argument(origin + ": partial_rotary_factor " + std::to_string(partial) +
                            " does not give an even rotary dimension of head_dim " + std::to_string(c.head_dim));
  }
  if (c.rotary_dim == c.head_dim) c.rotary_dim = 0;
  const int group_size = c.n_group > 0 ? c.num_experts / c.n_group : 0;
  if (c.n_group <= 0 || c.num_experts % c.n_group != 0 || group_size < 2 || c.topk_group <= 0 ||
      c.topk_group > c.n_group || c.topk_group * group_size < c.num_experts_per_tok) {
    return invalid_argument(origin + ": n_group " + std::to_string(c.n_group) + " / topk_group " +
                            std::to_string(c.topk_group) + " do not fit " + std::to_string(c.num_experts) +
                            " experts with top-" + std::to_string(c.num_experts_per_tok));
  }
  return Status::ok();
}

// A RoPE scaling object (rope_scaling, or transformers' rope_parameters): "default" / absent
// type = none, "yarn" = YaRN; anything else is refused by name.
Status parse_rope_scaling(const Json& r, const std::string& o, ModelConfig& c) {
  std::string type;
  for (const char* key : {"type", "rope_type"}) {
    if (r.contains(key) && r[key].is_string()) type = r[key].get<std::string>();
  }
  if (type == "default" || type.empty()) return Status::ok();
  if (type != "yarn") {
    return unimplemented(o + ": rope type '" + type + "' is not supported (supported: default, yarn)");
  }
  double factor = 0, beta_fast = c.yarn.beta_fast, beta_slow = c.yarn.beta_slow, mscale = c.yarn.mscale,
         mscale_all_dim = c.yarn.mscale_all_dim;
  DENSA_RETURN_IF_ERROR(read_key(r, "factor", true, o, factor));
  DENSA_RETURN_IF_ERROR(read_key(r, "original_max_position_embeddings", true, o,
                                 c.yarn.original_max_position_embeddings));
  DENSA_RETURN_IF_ERROR(read_key(r, "beta_fast", false, o, beta_fast));
  DENSA_RETURN_IF_ERROR(read_key(r, "beta_slow", false, o, beta_slow));
  DENSA_RETURN_IF_ERROR(read_key(r, "mscale", false, o, mscale));
  DENSA_RETURN_IF_ERROR(read_key(r, "mscale_all_dim", false, o, mscale_all_dim));
  if (!(factor >= 1.0) || c.yarn.original_max_position_embeddings <= 0 || !(beta_fast > 0) || !(beta_slow > 0)) {
    return invalid_argument(o + ": need factor >= 1, original_max_position_embeddings > 0 and positive betas");
  }
  c.yarn = {static_cast<float>(factor), c.yarn.original_max_position_embeddings, static_cast<float>(beta_fast),
            static_cast<float>(beta_slow), static_cast<float>(mscale), static_cast<float>(mscale_all_dim)};
  return Status::ok();
}

// rope_scaling of type "yarn" (DeepSeek-V3 / Kimi K2); absent or null = none.
Status parse_yarn(const Json& j, const std::string& origin, ModelConfig& c) {
  const auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_object()) return invalid_argument(origin + ": key 'rope_scaling' must be an object");
  const std::string type = it->value("type", it->value("rope_type", std::string()));
  if (type != "yarn") {
    return unimplemented(origin + ": rope_scaling type '" + type + "' is not supported (supported: yarn)");
  }
  return parse_rope_scaling(*it, origin + " rope_scaling", c);
}

// transformers v5 rope_parameters {"rope_type", "rope_theta", yarn keys} (GLM-4.7-Flash,
// GLM-5): rope_theta and the scaling from there. Absent = rope_theta / rope_scaling keys.
Status parse_rope_parameters(const Json& j, const std::string& origin, ModelConfig& c) {
  const auto it = j.find("rope_parameters");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_object()) return invalid_argument(origin + ": key 'rope_parameters' must be an object");
  const std::string o = origin + " rope_parameters";
  double theta = c.rope_theta;
  DENSA_RETURN_IF_ERROR(read_key(*it, "rope_theta", false, o, theta));
  c.rope_theta = static_cast<float>(theta);
  return parse_rope_scaling(*it, o, c);
}

// mlp_layer_types ["dense" | "sparse", one per layer] (GLM-4.7-Flash, GLM-5): dense layers
// go to mlp_only_layers; absent = first_k_dense_replace alone decides.
Status parse_mlp_layer_types(const Json& j, const std::string& origin, ModelConfig& c) {
  const auto it = j.find("mlp_layer_types");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array() || it->size() != static_cast<size_t>(c.num_layers)) {
    return invalid_argument(origin + ": key 'mlp_layer_types' must list one of \"dense\" / \"sparse\" per layer (" +
                            std::to_string(c.num_layers) + ")");
  }
  c.first_k_dense_replace = 0;
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& v = (*it)[i];
    if (!v.is_string() || (v.get<std::string>() != "dense" && v.get<std::string>() != "sparse")) {
      return invalid_argument(origin + ": mlp_layer_types[" + std::to_string(i) + "] is " + v.dump() +
                              " (expected \"dense\" or \"sparse\")");
    }
    if (v.get<std::string>() == "dense") c.mlp_only_layers.push_back(static_cast<int>(i));
  }
  return Status::ok();
}

// GLM-5 (glm_moe_dsa): the lightning indexer's shape and top-k. Every layer must run its own
// indexer ("full"); a layer that reuses another's selection ("shared") is refused by name.
Status parse_dsa(const Json& j, const std::string& origin, ModelConfig& c) {
  DsaConfig& d = c.dsa;
  DENSA_RETURN_IF_ERROR(read_key(j, "index_topk", true, origin, d.index_topk));
  DENSA_RETURN_IF_ERROR(read_key(j, "index_n_heads", true, origin, d.index_n_heads));
  DENSA_RETURN_IF_ERROR(read_key(j, "index_head_dim", true, origin, d.index_head_dim));
  if (c.mla.q_lora_rank <= 0) return invalid_argument(origin + ": DSA's indexer reads q_lora_rank's latent; need q_lora_rank");
  if (d.index_topk <= 0 || d.index_n_heads <= 0 || d.index_head_dim <= c.mla.qk_rope_head_dim) {
    return invalid_argument(origin + ": DSA needs positive index_topk and index_n_heads, and index_head_dim above "
                            "qk_rope_head_dim");
  }
  bool interleave = true;
  DENSA_RETURN_IF_ERROR(read_key(j, "indexer_rope_interleave", false, origin, interleave));
  if (interleave != c.mla.rope_interleave) {
    return unimplemented(origin + ": indexer_rope_interleave differs from rope_interleave (supported: equal)");
  }
  for (const char* key : {"index_topk_pattern", "index_topk_freq", "indexer_types"}) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    const bool all_full = (it->is_number_integer() && it->get<int64_t>() == 1) ||
                          (it->is_array() && std::all_of(it->begin(), it->end(), [](const Json& v) {
                             return v.is_string() && v.get<std::string>() == "full";
                           }));
    if (!all_full) {
      return unimplemented(origin + ": " + key + " " + it->dump() +
                           " (layers sharing another layer's top-k selection are not supported)");
    }
  }
  return Status::ok();
}

// DeepSeek-V3 / Kimi K2: multi-head latent attention, YaRN, and the GLM-style MoE (sigmoid
// routing with correction bias and grouped top-k, routed_scaling_factor, n_shared_experts,
// first_k_dense_replace leading dense layers).
Status parse_deepseek_v3(const Json& j, const std::string& origin, ModelConfig& c) {
  MlaConfig& m = c.mla;
  DENSA_RETURN_IF_ERROR(read_key(j, "q_lora_rank", false, origin, m.q_lora_rank));  // null = 0
  DENSA_RETURN_IF_ERROR(read_key(j, "kv_lora_rank", true, origin, m.kv_lora_rank));
  DENSA_RETURN_IF_ERROR(read_key(j, "qk_nope_head_dim", true, origin, m.qk_nope_head_dim));
  DENSA_RETURN_IF_ERROR(read_key(j, "qk_rope_head_dim", true, origin, m.qk_rope_head_dim));
  DENSA_RETURN_IF_ERROR(read_key(j, "v_head_dim", true, origin, m.v_head_dim));
  DENSA_RETURN_IF_ERROR(read_key(j, "rope_interleave", false, origin, m.rope_interleave));
  if (m.kv_lora_rank <= 0 || m.qk_nope_head_dim <= 0 || m.qk_rope_head_dim <= 0 || m.qk_rope_head_dim % 2 != 0 ||
      m.v_head_dim <= 0) {
    return invalid_argument(origin + ": MLA needs positive kv_lora_rank, qk_nope_head_dim, v_head_dim and an "
                            "even qk_rope_head_dim");
  }
  if (int64_t{m.qk_nope_head_dim} + m.qk_rope_head_dim > INT32_MAX) {
    return invalid_argument(origin + ": qk_nope_head_dim + qk_rope_head_dim out of range");
  }
  c.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;  // q/k head width (informational)
  c.num_kv_heads = c.num_heads;
  for (const char* key : {"scoring_func", "topk_method"}) {
    const auto it = j.find(key);
    const std::string want = std::string(key) == "scoring_func" ? "sigmoid" : "noaux_tc";
    if (it != j.end() && !it->is_null() && (!it->is_string() || it->get<std::string>() != want)) {
      return unimplemented(origin + ": " + key + " " + it->dump() + " is not supported (supported: " + want + ")");
    }
  }
  int layer_freq = 1;
  DENSA_RETURN_IF_ERROR(read_key(j, "moe_layer_freq", false, origin, layer_freq));
  if (layer_freq != 1) return unimplemented(origin + ": moe_layer_freq " + std::to_string(layer_freq) + " (supported: 1)");
  DENSA_RETURN_IF_ERROR(read_key(j, "n_routed_experts", true, origin, c.num_experts));
  DENSA_RETURN_IF_ERROR(read_key(j, "num_experts_per_tok", true, origin, c.num_experts_per_tok));
  DENSA_RETURN_IF_ERROR(read_key(j, "moe_intermediate_size", true, origin, c.moe_intermediate_size));
  c.moe_routing = MoeRouting::kSigmoidGrouped;
  int n_shared = 0;
  double scaling = 1.0;
  DENSA_RETURN_IF_ERROR(read_key(j, "n_shared_experts", false, origin, n_shared));
  DENSA_RETURN_IF_ERROR(read_key(j, "first_k_dense_replace", false, origin, c.first_k_dense_replace));
  DENSA_RETURN_IF_ERROR(read_key(j, "n_group", false, origin, c.n_group));
  DENSA_RETURN_IF_ERROR(read_key(j, "topk_group", false, origin, c.topk_group));
  DENSA_RETURN_IF_ERROR(read_key(j, "norm_topk_prob", false, origin, c.norm_topk_prob));
  DENSA_RETURN_IF_ERROR(read_key(j, "routed_scaling_factor", false, origin, scaling));
  DENSA_RETURN_IF_ERROR(check_experts(c, origin, "n_routed_experts"));
  c.routed_scaling_factor = static_cast<float>(scaling);
  DENSA_RETURN_IF_ERROR(shared_expert_width(n_shared, c, origin));
  const int group_size = c.n_group > 0 ? c.num_experts / c.n_group : 0;
  if (c.n_group <= 0 || c.num_experts % c.n_group != 0 || group_size < 2 || c.topk_group <= 0 ||
      c.topk_group > c.n_group || c.topk_group * group_size < c.num_experts_per_tok) {
    return invalid_argument(origin + ": n_group " + std::to_string(c.n_group) + " / topk_group " +
                            std::to_string(c.topk_group) + " do not fit " + std::to_string(c.num_experts) +
                            " experts with top-" + std::to_string(c.num_experts_per_tok));
  }
  return parse_yarn(j, origin, c);
}

bool is_mla_family(const std::string& a) {
  return a == "DeepseekV3ForCausalLM" || a == "Glm4MoeLiteForCausalLM" || a == "GlmMoeDsaForCausalLM";
}

// The decoder itself, from `j` (the whole config, or a wrapper's text_config), computed as the
// family of `a`.
Status parse_text_model(const Json& j, const std::string& origin, const std::string& a, ModelConfig& c) {
  DENSA_RETURN_IF_ERROR(read_key(j, "vocab_size", true, origin, c.vocab_size));
  DENSA_RETURN_IF_ERROR(read_key(j, "hidden_size", true, origin, c.hidden_size));
  DENSA_RETURN_IF_ERROR(read_key(j, "num_hidden_layers", true, origin, c.num_layers));
  DENSA_RETURN_IF_ERROR(read_key(j, "num_attention_heads", true, origin, c.num_heads));
  c.num_kv_heads = c.num_heads;
  DENSA_RETURN_IF_ERROR(read_key(j, "num_key_value_heads", false, origin, c.num_kv_heads));
  DENSA_RETURN_IF_ERROR(read_key(j, "intermediate_size", true, origin, c.intermediate_size));
  DENSA_RETURN_IF_ERROR(read_key(j, "num_nextn_predict_layers", false, origin, c.num_nextn_layers));
  if (c.num_heads <= 0 || c.num_kv_heads <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 ||
      c.vocab_size <= 0 || c.intermediate_size <= 0) {
    return invalid_argument(origin + ": dimensions must be positive");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return invalid_argument(origin + ": num_attention_heads " + std::to_string(c.num_heads) +
                            " is not a multiple of num_key_value_heads " + std::to_string(c.num_kv_heads));
  }
  c.head_dim = c.hidden_size / c.num_heads;
  DENSA_RETURN_IF_ERROR(read_key(j, "head_dim", false, origin, c.head_dim));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) {
    return invalid_argument(origin + ": head_dim must be positive and even, got " + std::to_string(c.head_dim));
  }
  if (a == "MixtralForCausalLM") DENSA_RETURN_IF_ERROR(parse_mixtral(j, origin, c));
  if (a == "Qwen3MoeForCausalLM" || a == "Qwen2MoeForCausalLM") {
    DENSA_RETURN_IF_ERROR(parse_qwen_moe(j, origin, a == "Qwen3MoeForCausalLM", c));
  }
  if (a == "Glm4MoeForCausalLM") DENSA_RETURN_IF_ERROR(parse_glm4_moe(j, origin, c));
  if (is_mla_family(a)) {
    DENSA_RETURN_IF_ERROR(parse_deepseek_v3(j, origin, c));
    if (a != "DeepseekV3ForCausalLM") {
      // GLM's MLA models: the DeepSeek-V3 computation with GLM's config conventions.
      double partial = 1.0;
      DENSA_RETURN_IF_ERROR(read_key(j, "partial_rotary_factor", false, origin, partial));
      if (partial != 1.0) return unimplemented(origin + ": partial_rotary_factor with MLA (supported: 1.0)");
      // transformers' defaults when neither key is given: GLM-4.7-Flash 1 dense layer, GLM-5 3.
      if (!j.contains("first_k_dense_replace")) c.first_k_dense_replace = a == "GlmMoeDsaForCausalLM" ? 3 : 1;
      DENSA_RETURN_IF_ERROR(parse_mlp_layer_types(j, origin, c));
    }
    if (a == "GlmMoeDsaForCausalLM") DENSA_RETURN_IF_ERROR(parse_dsa(j, origin, c));
  }
  double eps = c.rms_norm_eps, theta = c.rope_theta;
  DENSA_RETURN_IF_ERROR(read_key(j, "rms_norm_eps", false, origin, eps));
  DENSA_RETURN_IF_ERROR(read_key(j, "rope_theta", false, origin, theta));
  c.rms_norm_eps = static_cast<float>(eps);
  c.rope_theta = static_cast<float>(theta);
  DENSA_RETURN_IF_ERROR(parse_rope_parameters(j, origin, c));
  DENSA_RETURN_IF_ERROR(read_key(j, "max_position_embeddings", false, origin, c.max_position_embeddings));
  DENSA_RETURN_IF_ERROR(read_key(j, "tie_word_embeddings", false, origin, c.tie_word_embeddings));
  DENSA_RETURN_IF_ERROR(read_token_id(j, "bos_token_id", origin, c.bos_token_id));
  DENSA_RETURN_IF_ERROR(read_token_id(j, "eos_token_id", origin, c.eos_token_id));
  return Status::ok();
}

constexpr const char* kSupported =
    "LlamaForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, Glm4MoeForCausalLM, "
    "DeepseekV3ForCausalLM, KimiK25ForConditionalGeneration, Glm4MoeLiteForCausalLM, GlmMoeDsaForCausalLM";

Result<ModelConfig> parse_json(const Json& j, const std::string& origin) {
  if (!j.is_object()) return invalid_argument(origin + ": config is not a JSON object");
  ModelConfig c;
  const auto arch_it = j.find("architectures");
  if (arch_it == j.end() || !arch_it->is_array() || arch_it->empty() || !(*arch_it)[0].is_string()) {
    return invalid_argument(origin + ": missing key 'architectures' (a list of strings)");
  }
  c.architecture = (*arch_it)[0].get<std::string>();
  const std::string& a = c.architecture;
  if (a == "KimiK25ForConditionalGeneration") {
    // Kimi-K2.5: the DeepSeek-V3 text model under text_config, its tensors under
    // "language_model.", beside a vision tower and projector (not served: text only).
    const auto t = j.find("text_config");
    if (t == j.end() || !t->is_object()) return invalid_argument(origin + ": missing object 'text_config'");
    DENSA_RETURN_IF_ERROR(parse_text_model(*t, origin + " text_config", "DeepseekV3ForCausalLM", c));
    DENSA_RETURN_IF_ERROR(read_key(j, "tie_word_embeddings", false, origin, c.tie_word_embeddings));
    DENSA_RETURN_IF_ERROR(read_token_id(j, "bos_token_id", origin, c.bos_token_id));
    DENSA_RETURN_IF_ERROR(read_token_id(j, "eos_token_id", origin, c.eos_token_id));
    c.hf_tensor_prefix = "language_model.";
    c.has_vision_tower = j.contains("vision_config");
    return c;
  }
  if (a != "LlamaForCausalLM" && a != "MixtralForCausalLM" && a != "Qwen3MoeForCausalLM" &&
      a != "Qwen2MoeForCausalLM" && a != "Glm4MoeForCausalLM" && !is_mla_family(a)) {
    return unimplemented(origin + ": unsupported architecture '" + c.architecture + "' (supported: " + kSupported + ")");
  }
  DENSA_RETURN_IF_ERROR(parse_text_model(j, origin, a, c));
  return c;
}

}  // namespace

Result<ModelConfig> parse_hf_config_text(const std::string& json_text, const std::string& origin) {
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const std::exception& e) {
    return invalid_argument(origin + ": malformed JSON: " + e.what());
  }
  try {
    return parse_json(j, origin);
  } catch (const std::exception& e) {  // type errors inside nlohmann accessors
    return invalid_argument(origin + ": bad config value: " + e.what());
  }
}

bool ModelConfig::is_moe_layer(int layer) const {
  if (num_experts <= 0 || layer < first_k_dense_replace || (layer + 1) % decoder_sparse_step != 0) return false;
  for (int l : mlp_only_layers) {
    if (l == layer) return false;
  }
  return true;
}

Result<ModelConfig> parse_hf_config(const std::filesystem::path& config_json) {
  std::ifstream in(config_json, std::ios::binary);
  if (!in) return not_found(config_json.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_hf_config_text(ss.str(), config_json.string());
}

}  // namespace densa
