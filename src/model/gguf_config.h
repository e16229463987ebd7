#pragma once
// ModelConfig <-> GGUF metadata, with llama.cpp's architecture names and keys, both
// directions in one place so a file densa writes reads back to the same config:
//   llama      LlamaForCausalLM / MixtralForCausalLM (Q/K rows permuted, see model_loader)
//   qwen3moe   Qwen3MoeForCausalLM     qwen2moe  Qwen2MoeForCausalLM
//   glm4moe    Glm4MoeForCausalLM      deepseek2 DeepseekV3ForCausalLM (DeepSeek-V3, Kimi K2;
//                                      written also for KimiK25ForConditionalGeneration's text
//                                      model and Glm4MoeLiteForCausalLM, read back as DeepseekV3)
//   glm-dsa    GlmMoeDsaForCausalLM (GLM-5: deepseek2's keys plus attention.indexer.head_count /
//              key_length / top_k; tensors blk.N.indexer.attn_q_b / attn_k / k_norm / proj)
// Keys are "{arch}.<name>" (block_count, expert_count, attention.kv_lora_rank, ...). What
// GGUF metadata cannot say is read from the tensor directory: which Qwen layers are dense
// (no blk.N.ffn_gate_inp), whether q/k/v carry a bias and q/k a norm.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "io/gguf_file.h"
#include "io/model_config.h"

namespace densa {

// llama.cpp's name for c.architecture ("qwen3moe", ...); unimplemented for others.
Result<std::string> gguf_arch_name(const ModelConfig& c);

// The config a GGUF file describes. Errors name the file and the key.
Result<ModelConfig> gguf_model_config(const GgufFile& f);

// The metadata of a GGUF holding c (general.*, "{arch}.*", tokenizer ids), general.file_type
// = file_type (llama_ftype). unimplemented for configs GGUF cannot express (YaRN mscale != 1,
// DeepSeek rope_interleave false, Llama / Mixtral, which need the permuted Q/K rows).
Result<std::vector<std::pair<std::string, GgufValue>>> gguf_model_metadata(const ModelConfig& c,
                                                                           uint32_t file_type);

// "blk.{layer}.{part}.weight" (part "attn_q", "ffn_gate_exps", ...).
std::string gguf_blk(int layer, const std::string& part);

}  // namespace densa
