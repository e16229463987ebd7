#pragma once
// The architecture hyper-parameters of a decoder-only transformer, filled from a Hugging Face
// config.json or from GGUF metadata. Everything downstream (weights, KV layout, capacity)
// reads dimensions from here.
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/ids.h"
#include "core/status.h"

namespace densa {

struct ModelConfig {
  std::string architecture;   // "LlamaForCausalLM", "MixtralForCausalLM" (HF names)
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;           // hidden_size / num_heads unless the config says otherwise
  int intermediate_size = 0;  // dense FFN width, or per-expert width for MoE
  int num_experts = 0;        // 0 = dense
  int num_experts_per_tok = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  TokenId bos_token_id = 1;
  TokenId eos_token_id = 2;

  bool is_moe() const { return num_experts > 0; }
};

// Parses a Hugging Face config.json (path to the file). Errors name the file and the key.
Result<ModelConfig> parse_hf_config(const std::filesystem::path& config_json);
// Same from the JSON text; `origin` names the source in error messages.
Result<ModelConfig> parse_hf_config_text(const std::string& json_text, const std::string& origin);

}  // namespace densa
