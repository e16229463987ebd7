#pragma once
// The architecture hyper-parameters of a decoder-only transformer, filled from a Hugging Face
// config.json or from GGUF metadata. Everything downstream (weights, KV layout, capacity)
// reads dimensions from here.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace densa {

// How a MoE layer turns router logits into expert choices and weights (model/moe_routing.h).
enum class MoeRouting : uint8_t {
  kSoftmaxTopK,     // Mixtral / Qwen-MoE: softmax over all experts, top-k, optional renormalise
  kSigmoidGrouped,  // GLM-4.5 / DeepSeek-V3 (noaux_tc): sigmoid, correction bias, grouped top-k
};

// YaRN RoPE scaling (config rope_scaling with type "yarn"); factor 0 = no scaling.
struct YarnScaling {
  float factor = 0.0f;
  int original_max_position_embeddings = 0;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  float mscale = 1.0f;
  float mscale_all_dim = 0.0f;
};

// Multi-head latent attention (DeepSeek-V3 / Kimi K2, model/arch_deepseek_v3.h); kv_lora_rank
// 0 = not MLA. The KV cache holds kv_lora_rank + qk_rope_head_dim values per token per layer.
struct MlaConfig {
  int q_lora_rank = 0;  // 0: q_proj straight from the hidden state (q_lora_rank null)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool rope_interleave = true;  // the checkpoint's q_pe / k_pe dims are interleaved pairs
};

// DeepSeek Sparse Attention (GLM-5 glm_moe_dsa, DeepSeek-V3.2) on top of MLA: a lightning
// indexer scores every cached token per query and the query attends only to the top
// index_topk of them. index_topk 0 = dense MLA.
struct DsaConfig {
  int index_topk = 0;
  int index_n_heads = 0;
  int index_head_dim = 0;  // its first qk_rope_head_dim dims carry RoPE
};

struct ModelConfig {
  std::string architecture;   // HF architectures[0]: "LlamaForCausalLM", "MixtralForCausalLM",
                              // "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM", "Glm4MoeForCausalLM",
                              // "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration",
                              // "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM"
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;           // hidden_size / num_heads unless the config says otherwise
  int intermediate_size = 0;  // dense FFN width (Mixtral: the per-expert width, no dense layers)
  int num_experts = 0;        // routed experts; 0 = dense
  int num_experts_per_tok = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  TokenId bos_token_id = 1;
  TokenId eos_token_id = 2;

  // ---- attention variants (all off for Llama / Mixtral) ----
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2-MoE; GLM attention_bias)
  bool qk_norm = false;         // per-head RMSNorm of q and k before RoPE (Qwen3; GLM use_qk_norm)
  int rotary_dim = 0;           // leading dims of each head RoPE rotates (partial_rotary_factor
                                // * head_dim); 0 = head_dim

  // ---- MoE layers ----
  int moe_intermediate_size = 0;   // per-expert width (Mixtral: = intermediate_size)
  MoeRouting moe_routing = MoeRouting::kSoftmaxTopK;
  bool norm_topk_prob = true;      // renormalise the kept top-k weights to sum to 1
  float routed_scaling_factor = 1.0f;  // routed weights multiplied by this (GLM / DeepSeek)
  int n_group = 1;                 // kSigmoidGrouped: expert groups, and how many are kept
  int topk_group = 1;
  int shared_expert_intermediate_size = 0;  // 0 = no shared expert (GLM: n_shared * moe width)
  bool shared_expert_gate = false;  // Qwen2-MoE: shared output * sigmoid(shared_expert_gate . x)
  // Which layers are MoE: layer i is dense if i < first_k_dense_replace (GLM / DeepSeek),
  // (i + 1) % decoder_sparse_step != 0 or i is in mlp_only_layers (Qwen).
  int first_k_dense_replace = 0;
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;

  // ---- deepseek_v3 (DeepseekV3ForCausalLM) ----
  MlaConfig mla;
  YarnScaling yarn;
  DsaConfig dsa;

  // ---- checkpoint layout ----
  // Prepended to every HF tensor name: "language_model." when the text model sits inside a
  // multimodal wrapper (Kimi-K2.5), whose vision tensors are then recognised and skipped.
  std::string hf_tensor_prefix;
  bool has_vision_tower = false;
  // num_nextn_predict_layers: multi-token-prediction blocks stored at layer indices
  // num_layers .. num_layers + num_nextn_layers - 1. Recognised and not loaded (no speculative
  // decoding); num_layers counts only the decoder layers that run.
  int num_nextn_layers = 0;

  bool is_moe() const { return num_experts > 0; }
  bool is_mla() const { return mla.kv_lora_rank > 0; }
  bool is_dsa() const { return dsa.index_topk > 0; }
  // "GQA", "MLA" or "MLA+DSA", for `densa info` and messages.
  const char* attention_kind() const { return is_dsa() ? "MLA+DSA" : is_mla() ? "MLA" : "GQA"; }
  bool is_moe_layer(int layer) const;
  int rope_dim() const { return rotary_dim == 0 ? head_dim : rotary_dim; }
};

// Parses a Hugging Face config.json (path to the file). Errors name the file and the key.
Result<ModelConfig> parse_hf_config(const std::filesystem::path& config_json);
// Same from the JSON text; `origin` names the source in error messages.
Result<ModelConfig> parse_hf_config_text(const std::string& json_text, const std::string& origin);

}  // namespace densa
