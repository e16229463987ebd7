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
  out = v.get<TokenId>();
  return Status::ok();
}

Result<ModelConfig> parse_json(const Json& j, const std::string& origin) {
  if (!j.is_object()) return invalid_argument(origin + ": config is not a JSON object");
  ModelConfig c;
  const auto arch_it = j.find("architectures");
  if (arch_it == j.end() || !arch_it->is_array() || arch_it->empty() || !(*arch_it)[0].is_string()) {
    return invalid_argument(origin + ": missing key 'architectures' (a list of strings)");
  }
  c.architecture = (*arch_it)[0].get<std::string>();
  const bool is_llama = c.architecture == "LlamaForCausalLM";
  const bool is_mixtral = c.architecture == "MixtralForCausalLM";
  if (!is_llama && !is_mixtral) {
    return unimplemented(origin + ": unsupported architecture '" + c.architecture +
                         "' (supported: LlamaForCausalLM, MixtralForCausalLM)");
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
  if (is_mixtral) {
    DENSA_RETURN_IF_ERROR(read_key(j, "num_local_experts", true, origin, c.num_experts));
    DENSA_RETURN_IF_ERROR(read_key(j, "num_experts_per_tok", true, origin, c.num_experts_per_tok));
    if (c.num_experts <= 0 || c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts) {
      return invalid_argument(origin + ": need 0 < num_experts_per_tok <= num_local_experts");
    }
  }
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

Result<ModelConfig> parse_hf_config(const std::filesystem::path& config_json) {
  std::ifstream in(config_json, std::ios::binary);
  if (!in) return not_found(config_json.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_hf_config_text(ss.str(), config_json.string());
}

}  // namespace densa
