#pragma once
// `densa quantize`: writes a quantized checkpoint that densa (and other engines) load as is.
//  * Hugging Face dir -> Hugging Face dir, --to fp8 | int4 | bf16:
//      fp8:  DeepSeek-V3 / Kimi-K2 form (`weight` F8_E4M3 + F32 `weight_scale_inv`, 128x128
//            blocks, quantization_config {"quant_method": "fp8", ...}),
//      int4: compressed-tensors pack-quantized (`weight_packed` I32, BF16 `weight_scale`,
//            `weight_shape`, config_groups with group_size 32 or 128),
//      bf16: plain BF16 `weight`.
//    config.json gains the quantization_config; tokenizer and generation files are copied.
//  * GGUF -> GGUF, --to q8_0 | q4_0: standard ggml block layouts, metadata copied
//    (general.file_type updated), tensor order kept, data aligned to general.alignment.
//    Q/K rows stay in GGUF's permuted order (quantization is per row, so this commutes).
//  * Hugging Face dir -> .gguf file (the output path ends in ".gguf"), --to f32 | f16 | bf16 |
//    q8_0 | q4_0: qwen3moe / qwen2moe / glm4moe / deepseek2 in llama.cpp's layout
//    (tools/model_files/gguf_model_writer.h); no tokenizer is written.
// Quantized: attention q/k/v/o, dense FFN and expert matrices. Kept as stored: norms, router,
// token embeddings, and lm_head (GGUF: token_embd, output) unless `lm_head` names a format:
//  * HF out: bf16, or the body's own format (fp8; int4 with the same group size, so that
//    compressed-tensors' one config group covers it: "lm_head" leaves "ignore");
//  * GGUF out: bf16, q8_0 or q4_0 (output.weight).
// A tied lm_head written this way gets its own tensor (HF: tie_word_embeddings false; GGUF:
// an output.weight beside token_embd), so the embeddings stay as stored.
// GGUF -> HF is not supported. Loading the output gives bit-identical weights to
// load_model(IN, {same target, same lm_head}).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "core/status.h"

namespace densa {

struct QuantizeOptions {
  std::filesystem::path input;   // HF directory or .gguf file
  std::filesystem::path output;  // directory (HF) or file (GGUF); created or overwritten
  std::string to;                // fp8 | int4 | bf16 (HF); q8_0 | q4_0 (GGUF); f32 | f16 too (HF -> GGUF)
  int group_size = 128;          // int4: 32 or 128
  std::string lm_head;           // "" keeps lm_head as stored; else a format name (above)
};

struct QuantizeReport {
  int64_t input_weight_bytes = 0;   // bytes of the input's tensor files
  int64_t output_weight_bytes = 0;  // bytes of the written tensor files
  int num_quantized = 0;            // matrices converted
  int num_kept = 0;                 // tensors copied as stored
};

// progress(done, total) after each tensor written.
Result<QuantizeReport> quantize_checkpoint(const QuantizeOptions& opts,
                                           const std::function<void(int, int)>& progress = nullptr);

}  // namespace densa
