#pragma once
// FP8 e4m3 weights with 2-D block scales, the DeepSeek-V3 / Kimi-K2 checkpoint format.
// A [rows, cols] matrix is cut into blocks of kFp8BlockRows x kFp8BlockCols (the last block
// row/column may be partial). Each block has one fp32 scale s = amax(|block|) / 448 (1 when the
// block is all zero); the codes are fp8(w / s) and the value is fp8_to_f32(code) * s.
// s is stored with `weight_scale_inv` semantics: the dequantization multiplier.
// Scales are laid out [ceil(rows/128), ceil(cols/128)] row-major, as in the checkpoints.
#include <cstdint>
#include <span>

#include "core/tensor_view.h"

namespace densa {

inline constexpr int64_t kFp8BlockRows = 128;
inline constexpr int64_t kFp8BlockCols = 128;

inline int64_t fp8_block_scale_rows(int64_t rows) { return (rows + kFp8BlockRows - 1) / kFp8BlockRows; }
inline int64_t fp8_block_scale_cols(int64_t cols) { return (cols + kFp8BlockCols - 1) / kFp8BlockCols; }

// Quantizes w [rows, cols] (row-major fp32) into codes [rows * cols] and
// scales [fp8_block_scale_rows(rows) * fp8_block_scale_cols(cols)].
void fp8_block_quantize(const float* w, int64_t rows, int64_t cols, std::span<uint8_t> codes,
                        std::span<float> scales);

// A WeightView over FP8 block-scaled storage (codes and scales as written above).
WeightView fp8_block_view(const uint8_t* codes, const float* scales, int64_t rows, int64_t cols);

// Reference dequantization of elements [begin, begin + count) of row `row` of an FP8
// block-scaled view: out[j] = fp8_to_f32(code) * scale of the element's block.
void fp8_block_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out);

}  // namespace densa
