#pragma once
// Pre-quantized Hugging Face checkpoints, read as they ship (no conversion of the weights):
//  * FP8 block-scaled (DeepSeek-V3 / Kimi-K2): config.json quantization_config
//    {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}; per matrix
//    `<name>.weight` F8_E4M3 [rows, cols] and `<name>.weight_scale_inv` F32 (or BF16)
//    [ceil(rows/128), ceil(cols/128)], the dequantization multiplier.
//  * INT4 compressed-tensors pack-quantized (Kimi-K2-Thinking style): quantization_config
//    {"quant_method": "compressed-tensors", "format": "pack-quantized", config_groups with
//    weights {num_bits 4, type int, symmetric, strategy group, group_size G}}; per matrix
//    `<name>.weight_packed` I32 [rows, cols/8] (8 nibbles per word, element 8j+i in bits
//    4i..4i+3, stored as q + 8), `<name>.weight_scale` BF16/F16/F32 [rows, cols/G] and
//    `<name>.weight_shape` I32/I64 [2] = [rows, cols]. INT4 scales are bf16 in memory: BF16
//    scales are used in place in the mapping (bit for bit what the checkpoint holds); F32 / F16
//    scales are rounded to bf16, to nearest even (a relative change <= 2^-9 per group scale).
// Tensors a checkpoint keeps unquantized (norms, router, embeddings, usually lm_head) are plain
// `.weight`. Any matrix read through load_matrix may be quantized, lm_head included (densa
// quantize / gen-model --lm-head-dtype write one; compressed-tensors then drops "lm_head" from
// "ignore"); what the file holds decides, not the "ignore" list.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "core/status.h"
#include "io/safetensors.h"
#include "model/model_weights.h"

namespace densa {

enum class HfQuantMethod { kNone, kFp8Block, kInt4Packed };

struct HfQuantConfig {
  HfQuantMethod method = HfQuantMethod::kNone;
  int64_t block_rows = 128;  // FP8
  int64_t block_cols = 128;  // FP8
  int group_size = 0;        // INT4
};

// Reads config.json's quantization_config; method kNone when there is none. Errors for a
// quantization_config densa cannot run (another method, bits, asymmetric, ...).
Result<HfQuantConfig> parse_hf_quant_config(const std::filesystem::path& config_json);

// The matrix `weight_name` ("....weight") when the checkpoint stores it quantized, in views
// over the mapping (FP8 scales converted to fp32, INT4 scales that are not BF16 converted to
// bf16, in buffers owned by `owner`); nullopt when it is stored as a plain tensor.
Result<std::optional<WeightView>> load_hf_quantized_matrix(const SafetensorsDir& st, const HfQuantConfig& qc,
                                                           const std::string& weight_name, int64_t rows,
                                                           int64_t cols, ModelWeights& owner);

}  // namespace densa
