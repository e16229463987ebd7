#pragma once
// Affine 8-bit rows: the one in-memory form of the GGUF block types whose values are
// code * scale + min with small integer codes (Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS,
// MXFP4), repacked at load so that one W8A8 kernel (kernels/matmul_affine8_avx512.cpp) runs
// all of them on vpdpbusd instead of holding them as fp32.
//
// A row is cols / 128 blocks (DType::kA8G16 / kA8G32, core/dtype.h). Block layout:
//   bytes [0, 128)          the uint8 codes of its 128 columns, in column order
//   then 128 / G fp32       the scale of each group of G columns
//   then 128 / G fp32       the min of each group
// Value of column k: code * scale + min, which is exact in real arithmetic for every source
// format (scale is an f16 times a small integer, min a multiple of the scale or an f16 times a
// small integer), and fp32 fmaf(scale, code, min) is the correctly rounded value. ggml's own
// dequantization of these formats rounds once too (its products are exact in fp32), so
// affine8_dequantize gives ggml's values bit for bit, except that where ggml computes an exact
// zero as -0 ((q - 32) * d with d < 0) this gives +0, which no sum can tell apart. Signed codes are stored with a bias folded
// into the min (Q6_K: code q, min -32 * scale; IQ4: grid value + 128, min -128 * scale).
// Memory: 10 bits per weight with groups of 32, 12 with groups of 16.
#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace densa {

inline constexpr int64_t kAffine8Block = 128;

inline constexpr bool is_affine8(DType t) { return t == DType::kA8G16 || t == DType::kA8G32; }
inline constexpr int64_t affine8_group(DType t) { return t == DType::kA8G16 ? 16 : 32; }
inline constexpr int64_t affine8_groups_per_block(DType t) { return kAffine8Block / affine8_group(t); }

// Block `b` of a row: its codes, its scales and its mins.
inline const uint8_t* affine8_codes(DType t, const uint8_t* row, int64_t b) {
  return row + b * dtype_block_bytes(t);
}
inline const float* affine8_scales(DType t, const uint8_t* row, int64_t b) {
  return reinterpret_cast<const float*>(row + b * dtype_block_bytes(t) + kAffine8Block);
}
inline const float* affine8_mins(DType t, const uint8_t* row, int64_t b) {
  return affine8_scales(t, row, b) + affine8_groups_per_block(t);
}

// The affine8 dtype ggml type `ggml_type` converts to, or nullopt (F32 / F16 / BF16 / Q8_0 /
// Q4_0 have their own forms; other types are not affine with small codes).
std::optional<DType> affine8_dtype_for_ggml(uint32_t ggml_type);

// Converts `rows` rows of `cols` elements of ggml blocks (rows * cols / block elements, rows
// back to back) into affine8 rows at `out` (rows * dtype_row_bytes(dtype, cols) bytes, any
// alignment). Precondition: affine8_dtype_for_ggml(ggml_type) and cols % 128 == 0. Returns false,
// leaving `out` unspecified, when some block's scale or min is not finite (an f16 infinity or
// NaN in the file, an E8M0 scale too large for fp32 with the bias): code * scale + min would
// then not be ggml's value, so such a tensor stays on the exact fp32 path.
bool affine8_from_ggml(uint32_t ggml_type, const uint8_t* blocks, int64_t rows, int64_t cols, uint8_t* out);

// out[j] = fmaf(scale, code, min) for columns [begin, begin + count) of one affine8 row.
void affine8_dequantize(DType t, const uint8_t* row, int64_t begin, int64_t count, float* out);

}  // namespace densa
