#pragma once
// Loads a model from a GGUF file or a Hugging Face directory (config.json + safetensors,
// single or sharded). Errors are one line naming the file, the tensor and the problem.
#include <filesystem>
#include <optional>

#include "core/status.h"
#include "model/model_weights.h"
#include "quant/quantize_matrix.h"

namespace densa {

// kPacked: affine rows (quant/affine_rows.h: the file's exact values, W8A8 kernels), 4-bit codes
// for the 4-bit formats (5-6 bits per weight) and 8-bit for the others (9-10); kAffine8: 8-bit
// codes for all; kF32: fp32 (the same values, 32 bits per weight, fp32 products).
enum class GgmlBlockForm : uint8_t { kPacked, kAffine8, kF32 };

struct LoadOptions {
  // Quantize-on-load target for the large matrices (attention, dense FFN, experts; norms,
  // router, embeddings and lm_head stay as stored): kBF16, kFP8E4M3 (128x128 block scales),
  // kI4 (group-wise symmetric), or GGUF's kQ8_0 / kQ4_0 (model/quantize_weights.h). nullopt
  // keeps the checkpoint's own dtypes. Pre-quantized FP8 / INT4 Hugging Face checkpoints load
  // as stored either way (model/hf_quantized.h); matrices already in the target are kept.
  std::optional<DType> weight_dtype;
  int weight_group_size = 128;  // INT4 group size: 32 or 128
  // The output projection's target, chosen apart from the body (quantize_lm_head); nullopt
  // keeps lm_head as stored. A tied lm_head gets its own copy; the embeddings stay as stored.
  std::optional<WeightQuantSpec> lm_head;
  // Prepares the matrices for the kernels, values unchanged: GGUF Q4_0 (as stored or quantized
  // on load) is repacked into the INT4 layout the W4A8 kernel reads (repack_ggml_for_kernels,
  // f16 scales), and matrices still in the mapped file are copied into huge pages
  // (move_matrices_to_arena), and MLA's kv_b_proj is split for the absorbed products
  // (prepare_mla_weights; an MLA forward needs it). Off for tools that report or rewrite the
  // stored tensors.
  bool prepare_for_kernels = true;
  // With prepare_for_kernels: the layout of INT4 g32 matrices (quant/int4_group.h). Unset: the
  // one the kernels run fastest here (matmul_int4_layout). kRows keeps them row-major; kInt4Tiles8
  // (the row-major results) or kInt4Tiles16 (exact group sums, GEMMs on AMX-INT8 where granted) where the CPU runs
  // it (matmul_runs_int4_layout; load_model refuses one it does not).
  std::optional<WeightLayout> int4_layout;
  // With prepare_for_kernels: INT8 (GGUF Q8_0) matrices in 16-row tiles
  // (WeightLayout::kInt8Tiles16) where the kernels read them (matmul_prefers_int8_tiles), and the
  // GGUF affine rows in theirs (kAffineTiles16, matmul_prefers_affine_tiles); false keeps both
  // row-major. The layouts' kernels round differently (kernels/matmul.h).
  bool int8_tiles = true;
  // With prepare_for_kernels: how GGUF Q4_1, Q5_0, Q5_1, Q2_K-Q6_K, IQ4_NL, IQ4_XS and MXFP4
  // matrices whose rows are whole 128-column blocks are held (GgmlBlockForm). Tools that
  // report or rewrite tensors always see fp32.
  GgmlBlockForm ggml_blocks = GgmlBlockForm::kPacked;
  // BF16 / F16 matrices keep fp32 activations and exact products (WeightView::amx = kOff on
  // each, set_half_float_amx) instead of taking AMX tiles with x rounded to bf16 where the CPU
  // grants them (serve --bf16-activations f32, the evaluator's "+x-f32" weights).
  bool bf16_f32_activations = false;
  // Keep only this rank's slice of a tensor- / expert-parallel layout (model/shard.h), cut
  // from the stored tensors before any conversion.
  ParallelLayout parallel;
};

Result<ModelWeights> load_model(const std::filesystem::path& path, const LoadOptions& options = {});

}  // namespace densa
