#pragma once
// The prepared activations of the INT8 and INT4 16-row tile layouts (WeightLayout::kInt8Tiles16,
// kInt4Tiles16), which the AVX-512 (VNNI, AMX-INT8) and the AVX2 kernels of those layouts read
// alike: x is quantized per row in groups of 32 (quant/activation_q8.h) and laid out in blocks of
// 16 rows, each 16 * int8t_x_stride(cols) bytes: per group g, the 16 rows' 32 int8 q (row t's at
// g * 512 + 32 t: one AMX A tile of 512 contiguous bytes), then the rows' fp32 x scales
// [16][groups], then 128 * each group's sum of q [16][groups] (the start of the sums against
// weights stored as code + 128). A buffer of n rows holds whole blocks (int8t_x_bytes).
#include <cstdint>

namespace densa::matmul_internal {

inline int64_t int8t_x_stride(int64_t cols) { return (cols + 8 * (cols / 32) + 63) / 64 * 64; }
inline int64_t int8t_x_bytes(int64_t cols, int64_t n) { return (n + 15) / 16 * 16 * int8t_x_stride(cols); }
struct Int8tXRow {
  const int32_t* q;   // the row's q of group g at q + 128 g (4 bytes each)
  const float* xs;    // its x scale of group g at xs[g]
  const int32_t* xc;  // 128 * its group g's sum of q at xc[g]
};
// Row i of a prepared buffer xp (x_stride = int8t_x_stride(cols)). The AVX-512 preparation
// writes the rows from n to the end of the last block as zeros (prepare_x_int8t_pad), so an AMX
// pass over the whole block adds nothing from them; the AVX2 kernels never read those rows.
inline Int8tXRow int8t_x_row(const uint8_t* xp, int64_t x_stride, int64_t cols, int64_t i) {
  const uint8_t* block = xp + i / 16 * 16 * x_stride;
  const int64_t t = i % 16, groups = cols / 32;
  return {reinterpret_cast<const int32_t*>(block + 32 * t), reinterpret_cast<const float*>(block + 16 * cols) + t * groups,
          reinterpret_cast<const int32_t*>(block + 16 * cols + 64 * groups) + t * groups};
}

}  // namespace densa::matmul_internal
