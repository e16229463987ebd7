#pragma once
// `densa gen-model`: writes a random-weight Llama / Mixtral checkpoint of any shape, as GGUF
// (arch "llama", experts stacked, Q/K rows in GGUF's permuted order) or as a Hugging Face
// directory (config.json + model.safetensors). By default with no tokenizer (benchmarks work on
// token ids); `tokenizer = "bytes"` writes a byte-level SentencePiece vocabulary into a GGUF
// (<unk>, <s>, </s>, the 256 byte tokens, "▁", then unreachable filler pieces), which llama.cpp
// requires to load a file and which lets densa's text commands run on it. Both formats load to
// the same weights for the same options and seed.
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
  std::string arch = "llama";  // llama | mixtral
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int intermediate_size = 0;   // dense FFN width, or per-expert width (mixtral)
  int num_experts = 0;         // mixtral only
  int num_experts_per_tok = 0;
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
  // (tokenizer.json or tiktoken.model, its configs and chat template: HF only; the vocabulary
  // size and BOS / EOS come from it, tools/gen_model_tokenizer.h).
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

// Parameter counts of a config (untied embeddings and lm_head, SwiGLU FFN).
int64_t count_total_params(const ModelConfig& c);
int64_t count_active_params(const ModelConfig& c);

// progress(done, total) after each tensor.
Result<GenModelReport> generate_model(const GenModelOptions& opts,
                                      const std::function<void(int, int)>& progress = nullptr);

}  // namespace densa
