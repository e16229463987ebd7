#include "io/model_config.h"

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

// rope_scaling of type "yarn" (DeepSeek-V3 / Kimi K2); absent or null = none.
Status parse_yarn(const Json& j, const std::string& origin, ModelConfig& c) {
  const auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_object()) return invalid_argument(origin + ": key 'rope_scaling' must be an object");
  const Json& r = *it;
  std::string type;
  for (const char* key : {"type", "rope_type"}) {
    if (r.contains(key) && r[key].is_string()) type = r[key].get<std::string>();
  }
  if (type != "yarn") {
    return unimplemented(origin + ": rope_scaling type '" + type + "' is not supported (supported: yarn)");
  }
  const std::string o = origin + " rope_scaling";
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

Result<ModelConfig> parse_json(const Json& j, const std::string& origin) {
  if (!j.is_object()) return invalid_argument(origin + ": config is not a JSON object");
  ModelConfig c;
  const auto arch_it = j.find("architectures");
  if (arch_it == j.end() || !arch_it->is_array() || arch_it->empty() || !(*arch_it)[0].is_string()) {
    return invalid_argument(origin + ": missing key 'architectures' (a list of strings)");
  }
  c.architecture = (*arch_it)[0].get<std::string>();
  const std::string& a = c.architecture;
  if (a != "LlamaForCausalLM" && a != "MixtralForCausalLM" && a != "Qwen3MoeForCausalLM" &&
      a != "Qwen2MoeForCausalLM" && a != "Glm4MoeForCausalLM" && a != "DeepseekV3ForCausalLM") {
    return unimplemented(origin + ": unsupported architecture '" + c.architecture +
                         "' (supported: LlamaForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM, "
                         "Qwen2MoeForCausalLM, Glm4MoeForCausalLM, DeepseekV3ForCausalLM)");
  }
  DENSA_RETURN_IF_ERROR(read_key(j, "vocab_size", true, origin, c.vocab_size));
  DENSA_RETURN_IF_ERROR(read_key(j, "hidden_size", true, origin, c.hidden_size));
  DENSA_RETURN_IF_ERROR(read_key(j, "num_hidden_layers", true, origin, c.num_layers));
  DENSA_RETURN_IF_ERROR(read_key(j, "num_attention_heads", true, origin, c.num_heads));
  c.num_kv_heads = c.num_heads;
  DENSA_RETURN_IF_ERROR(read_key(j, "num_key_value_heads", false, origin, c.num_kv_heads));
  DENSA_RETURN_IF_ERROR(read_key(j, "intermediate_size", true, origin, c.intermediate_size));
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
  if (a == "DeepseekV3ForCausalLM") DENSA_RETURN_IF_ERROR(parse_deepseek_v3(j, origin, c));
  double eps = c.rms_norm_eps, theta = c.rope_theta;
  DENSA_RETURN_IF_ERROR(read_key(j, "rms_norm_eps", false, origin, eps));
  DENSA_RETURN_IF_ERROR(read_key(j, "rope_theta", false, origin, theta));
  c.rms_norm_eps = static_cast<float>(eps);
  c.rope_theta = static_cast<float>(theta);
  DENSA_RETURN_IF_ERROR(read_key(j, "max_position_embeddings", false, origin, c.max_position_embeddings));
  DENSA_RETURN_IF_ERROR(read_key(j, "tie_word_embeddings", false, origin, c.tie_word_embeddings));
  DENSA_RETURN_IF_ERROR(read_token_id(j, "bos_token_id", origin, c.bos_token_id));
  DENSA_RETURN_IF_ERROR(read_token_id(j, "eos_token_id", origin, c.eos_token_id));
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
