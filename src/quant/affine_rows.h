#pragma once
// Affine rows: the in-memory form of the GGUF block types whose values are code * scale + min
// with small integer codes (Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS, MXFP4), repacked at
// load so that one W8A8 kernel (kernels/matmul/matmul_affine_avx512.cpp) runs all of them on vpdpbusd
// instead of holding them as fp32.
//
// A row is cols / 128 blocks (core/dtype.h lists the dtypes). Block layout:
//   the codes of its 128 columns: 8-bit types, 128 bytes in column order; 4-bit types, 64
//     bytes where byte 16j + e holds column 32j + e in its low nibble and column 32j + 16 + e
//     in its high nibble (j < 4, e < 16), and a nibble stands for affine_nibble_codes(t)[nibble]
//   per-group types (kA8G32, kA4G32, kA4IQ4, kA4MXFP4): 4 fp32 scales, then 4 fp32 mins
//   K-quant types (kA8K16, kA8K32, kA4K, kA4KIQ4): fp32 D, fp32 M, then int8 s and int8 m per
//     group (8 groups of 16 for kA8K16, else 4 of 32): scale = D * s, min = M * m
// Value of column k: code * scale + min, which is exact in real arithmetic for every source
// format (scale is an f16 times a small integer, min a multiple of the scale or an f16 times a
// small integer; D * s and M * m are such products, exact in fp32), and fp32
// fmaf(scale, code, min) is the correctly rounded value. ggml's own dequantization of these
// formats rounds once too (its products are exact in fp32), so affine_dequantize gives ggml's
// values bit for bit, except that where ggml computes an exact zero as -0 ((q - 32) * d with
// d < 0) this gives +0, which no sum can tell apart. Signed codes are stored with a bias
// folded into the min (Q6_K: code q, min -32 * scale; IQ4: grid level + 128, min -128 * scale;
// MXFP4: level + 12, min -12 * scale).
//
//   format          packed (default)   wide (8-bit codes)   bits per weight (packed, wide)
//   Q4_K            kA4K               kA8K32               5, 9
//   IQ4_XS          kA4KIQ4            kA8K32               5, 9
//   Q5_K            kA8K32             kA8K32               9
//   Q6_K Q3_K Q2_K  kA8K16             kA8K16               9.5
//   Q4_1            kA4G32             kA8G32               6, 10
//   IQ4_NL          kA4IQ4             kA8G32               6, 10
//   MXFP4           kA4MXFP4           kA8G32               6, 10
//   Q5_0 Q5_1       kA8G32             kA8G32               10
#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace densa {

inline constexpr int64_t kAffineBlock = 128;

inline constexpr bool is_affine_nibbles(DType t) {
  return t == DType::kA4G32 || t == DType::kA4IQ4 || t == DType::kA4MXFP4 || t == DType::kA4K || t == DType::kA4KIQ4;
}
// The K-quant layout: fp32 D and M per block, int8 s and m per group.
inline constexpr bool is_affine_super(DType t) {
  return t == DType::kA8K16 || t == DType::kA8K32 || t == DType::kA4K || t == DType::kA4KIQ4;
}
inline constexpr bool is_affine_rows(DType t) {
  return t == DType::kA8G32 || t == DType::kA4G32 || t == DType::kA4IQ4 || t == DType::kA4MXFP4 || is_affine_super(t);
}
inline constexpr int64_t affine_group(DType t) { return t == DType::kA8K16 ? 16 : 32; }
inline constexpr int64_t affine_groups_per_block(DType t) { return kAffineBlock / affine_group(t); }
inline constexpr int64_t affine_code_bytes(DType t) { return is_affine_nibbles(t) ? 64 : 128; }

// The 16 uint8 codes the nibbles of a 4-bit type stand for (0..15 for kA4G32).
const uint8_t* affine_nibble_codes(DType t);

// Block `b` of a row: its code bytes, and where its scale data starts (per-group types: the
// fp32 scales then mins; K-quant types: D, M, then the int8 s and m).
inline const uint8_t* affine_code_bytes_of(DType t, const uint8_t* row, int64_t b) {
  return row + b * dtype_block_bytes(t);
}
inline const uint8_t* affine_scale_bytes_of(DType t, const uint8_t* row, int64_t b) {
  return row + b * dtype_block_bytes(t) + affine_code_bytes(t);
}
// The scale and min of each group of block `b` (affine_groups_per_block(t) each), as fp32.
void affine_block_scales(DType t, const uint8_t* row, int64_t b, float* scale, float* min);
// The 128 codes of block `b`, in column order (nibbles looked up).
void affine_block_codes(DType t, const uint8_t* row, int64_t b, uint8_t* codes);

// How GGUF block types are held: kPacked, the 4-bit formats (Q4_1, Q4_K, IQ4_NL, IQ4_XS,
// MXFP4) in 4-bit rows and the others in 8-bit rows; kWide, all in 8-bit rows.
enum class AffineWidth : uint8_t { kPacked, kWide };

// The affine dtype ggml type `ggml_type` converts to, or nullopt (F32 / F16 / BF16 / Q8_0 /
// Q4_0 have their own forms; other types are not affine with small codes).
std::optional<DType> affine_dtype_for_ggml(uint32_t ggml_type, AffineWidth width = AffineWidth::kPacked);

// Converts `rows` rows of `cols` elements of ggml blocks (rows * cols / block elements, rows
// back to back) into rows of `t` at `out` (rows * dtype_row_bytes(t, cols) bytes, any
// alignment). Precondition: t is affine_dtype_for_ggml(ggml_type, some width) and
// cols % 128 == 0. Returns false, leaving `out` unspecified, when some block's scale or min is
// not finite (an f16 infinity or NaN in the file, an E8M0 scale too large for fp32 with the
// bias): code * scale + min would then not be ggml's value, so such a tensor stays on the exact
// fp32 path.
bool affine_from_ggml(uint32_t ggml_type, DType t, const uint8_t* blocks, int64_t rows, int64_t cols, uint8_t* out);

// out[j] = fmaf(scale, code, min) for columns [begin, begin + count) of one affine row.
void affine_dequantize(DType t, const uint8_t* row, int64_t begin, int64_t count, float* out);

}  // namespace densa
