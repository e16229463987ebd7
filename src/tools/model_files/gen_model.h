#pragma once
// `densa gen-model`: writes a random-weight checkpoint of any shape in one of four families,
// as a Hugging Face directory (config.json + model.safetensors, the family's own config keys
// and tensor names) or as GGUF (llama.cpp's architecture, metadata keys and tensor names):
//   llama / mixtral  LlamaForCausalLM / MixtralForCausalLM; GGUF "llama" (experts stacked, Q/K
//                    rows in GGUF's permuted order)
//   qwen3_moe        Qwen3MoeForCausalLM: per-head q/k RMSNorm, softmax top-k experts with
//                    norm_topk_prob, no shared expert; GGUF "qwen3moe"
//   deepseek_v3      DeepseekV3ForCausalLM: MLA (q_lora / kv_lora ranks), first_k_dense_replace
//                    dense layers, shared experts, sigmoid routing with e_score_correction_bias,
//                    n_group / topk_group, routed_scaling_factor; GGUF "deepseek2" (kv_b_proj
//                    written as llama.cpp's converter splits it: attn_k_b + attn_v_b)
// By default with no tokenizer (benchmarks work on token ids); `tokenizer = "bytes"` writes a
// byte-level SentencePiece vocabulary into a GGUF (<unk>, <s>, </s>, the 256 byte tokens, "▁",
// then unreachable filler pieces), which llama.cpp requires to load a file and which lets
// densa's text commands run on it; a tokenizer directory is copied into an HF checkpoint or
// written as tokenizer.ggml.* (and its template as tokenizer.chat_template) into a GGUF. Both
// formats load to the same weights for the same options and seed.
//
// Every tensor is drawn from its own stream (seed, Hugging Face name), uniform with standard
// deviation 1/sqrt(fan_in) (embeddings 1, norms 1), so activations stay O(1) through any
// depth and router logits are ~N(0,1), which spreads tokens over the experts. Values are
// rounded to the checkpoint's float type (f32, f16, else bf16) before being stored or
// quantized. The file is written tensor by tensor: peak memory is one tensor, not the model.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "core/status.h"
#include "io/model_config.h"

namespace densa {

struct GenModelOptions {
  std::string arch = "llama";  // llama | mixtral | qwen3_moe | deepseek_v3
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;        // GQA (not deepseek_v3, whose MLA has one latent per token)
  int head_dim = 0;            // 0 = hidden / heads (not deepseek_v3: see the MLA dims)
  int intermediate_size = 0;   // dense FFN width (deepseek_v3's leading dense layers), or
                               // per-expert width (mixtral)
  int num_experts = 0;         // routed experts: mixtral, qwen3_moe, deepseek_v3
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;  // qwen3_moe / deepseek_v3 per-expert width; 0 = intermediate_size
  // deepseek_v3 only.
  int num_shared_experts = 1;     // n_shared_experts (each moe_intermediate_size wide)
  int first_k_dense_replace = 1;  // leading dense layers
  int n_group = 1;                // expert groups, and how many of them a token keeps
  int topk_group = 1;
  double routed_scaling_factor = 2.5;
  int q_lora_rank = -1;           // -1 = hidden / 2; 0 = no q LoRA (q_proj straight from x)
  int kv_lora_rank = 0;           // 0 = hidden / 4
  int qk_nope_head_dim = 0;       // 0 = hidden / heads
  int qk_rope_head_dim = 0;       // 0 = qk_nope_head_dim / 2
  int v_head_dim = 0;             // 0 = qk_nope_head_dim
  int vocab_size = 32000;
  int max_context = 8192;
  // f32 | f16 | bf16 | q8_0 | q4_0 (GGUF) | f32 | f16 | bf16 | fp8 | int4 (Hugging Face).
  std::string dtype = "bf16";
  // lm_head's dtype; "" = the default (HF: the float type; GGUF: dtype). HF takes a float
  // type or dtype itself (fp8; int4 with group_size: "lm_head" then leaves the
  // compressed-tensors "ignore" list); GGUF takes f32 | f16 | bf16 | q8_0 | q4_0.
  std::string lm_head_dtype;
  int group_size = 32;         // int4 only: 32 or 128
  std::string format = "gguf"; // gguf | hf
  // none | bytes (GGUF only; needs vocab_size >= 260) | a directory holding a real tokenizer
  // (tokenizer.json or tiktoken.model, its configs and chat template; the vocabulary size and
  // BOS / EOS come from it, tools/model_files/gen_model_tokenizer.h). HF: the files are copied; GGUF: the
  // tokenizer is written as tokenizer.ggml.* (byte-level BPE with a known pre type, or
  // SentencePiece) with its chat template.
  std::string tokenizer = "none";
  uint64_t seed = 0;
  std::filesystem::path output;  // .gguf file or a directory (hf)
};

struct GenModelReport {
  ModelConfig config;
  int64_t total_params = 0;   // every matrix and norm
  int64_t active_params = 0;  // what one token uses: only top_k of the experts
  int64_t bytes_written = 0;  // tensor file bytes
};

// Fills shape fields from a preset name: dense-336m | moe-959m-a336m. Other fields kept.
Status apply_gen_model_preset(const std::string& preset, GenModelOptions& opts);

// The ModelConfig the options describe (validated: positive sizes, heads divide hidden, ...).
Result<ModelConfig> gen_model_config(const GenModelOptions& opts);

// Parameter counts of a config as gen-model writes it (untied embeddings and lm_head, SwiGLU
// FFN; every matrix, norm and bias of the Hugging Face form).
int64_t count_total_params(const ModelConfig& c);
int64_t count_active_params(const ModelConfig& c);

// progress(done, total) after each tensor.
Result<GenModelReport> generate_model(const GenModelOptions& opts,
                                      const std::function<void(int, int)>& progress = nullptr);

}  // namespace densa
