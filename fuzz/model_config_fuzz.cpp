// config.json (io/model_config): any text either parses or gives an error; a config that
// parses has the positive dimensions the model code divides by and indexes with.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<ModelConfig> parsed = parse_hf_config_text(text, "fuzz config.json");
  if (!parsed.is_ok()) return 0;
  const ModelConfig& c = *parsed;
  FUZZ_ASSERT(c.vocab_size > 0 && c.hidden_size > 0 && c.num_layers > 0 && c.num_heads > 0);
  FUZZ_ASSERT(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0);
  FUZZ_ASSERT(c.head_dim > 0 && c.rope_dim() > 0 && c.rope_dim() <= c.head_dim);
  FUZZ_ASSERT(c.bos_token_id >= 0 && c.eos_token_id >= 0);
  if (c.is_moe()) {
    FUZZ_ASSERT(c.num_experts_per_tok > 0 && c.num_experts_per_tok <= c.num_experts);
    FUZZ_ASSERT(c.moe_intermediate_size > 0 && c.shared_expert_intermediate_size >= 0);
  }
  for (int l = 0; l < c.num_layers && l < 64; ++l) (void)c.is_moe_layer(l);
  return 0;
}
