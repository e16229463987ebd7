#pragma once
// The prepared activations of the INT8 and INT4 16-row tile layouts (WeightLayout::kInt8Tiles16,
// kInt4Tiles16), which the AVX-512 (VNNI, AMX-INT8) and the AVX2 kernels of those layouts read
// alike: x is quantized per row in groups of 32 (quant/activation_q8.h) and laid out in blocks of
// 16 rows, each 16 * int8t_x_stride(cols) bytes: per group g, the 16 rows' 32 int8 q (row t's at
// g * 512 + 32 t: one AMX A tile of 512 contiguous bytes), then the rows' fp32 x scales
// [16][groups], then 128 * each group's sum of q [16][groups] (the start of the sums against
// weights stored as code + 128). A buffer of n rows holds whole blocks (int8t_x_bytes).
#include <cstdint>
#include <cstring>

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

// Rows [n, the end of n's block) as zeros: q, x scales and sums.
inline void int8t_x_pad(int64_t cols, uint8_t* xp, int64_t n) {
  for (int64_t i = n; i % 16 != 0; ++i) {
    const Int8tXRow row = int8t_x_row(xp, int8t_x_stride(cols), cols, i);
    for (int64_t g = 0; g < cols / 32; ++g) std::memset(const_cast<int32_t*>(row.q + 128 * g), 0, 32);
    std::memset(const_cast<float*>(row.xs), 0, static_cast<size_t>(cols / 32) * 4);
    std::memset(const_cast<int32_t*>(row.xc), 0, static_cast<size_t>(cols / 32) * 4);
  }
}

// Rows [i_begin, i_end) of dst (a buffer of n rows) copied from rows rows[i] of src (a
// preparation of the same cols): the bytes preparing those rows' x again would write, for a
// copy instead of a second rounding. The call that ends at n pads as the AVX-512 preparation
// does (int8t_x_pad).
inline void int8t_x_gather(const uint8_t* src, int64_t cols, const int32_t* rows, int64_t n, int64_t i_begin,
                           int64_t i_end, uint8_t* dst) {
  const int64_t stride = int8t_x_stride(cols), groups = cols / 32;
  for (int64_t i = i_begin; i < i_end; ++i) {
    const Int8tXRow s = int8t_x_row(src, stride, cols, rows[i]);
    const Int8tXRow d = int8t_x_row(dst, stride, cols, i);
    for (int64_t g = 0; g < groups; ++g) std::memcpy(const_cast<int32_t*>(d.q + 128 * g), s.q + 128 * g, 32);
    std::memcpy(const_cast<float*>(d.xs), s.xs, static_cast<size_t>(groups) * 4);
    std::memcpy(const_cast<int32_t*>(d.xc), s.xc, static_cast<size_t>(groups) * 4);
  }
  if (i_end == n) int8t_x_pad(cols, dst, n);
}

}  // namespace densa::matmul_internal
