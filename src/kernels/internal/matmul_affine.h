#pragma once
// The W8A8 kernel for affine-row weights (DType::kA8G16 / kA8G32 / kA4*, quant/affine_rows.h: GGUF
// K-quants, IQ4 and MXFP4 repacked at load), called through matmul_quant_avx512.h's entry
// points. Requires AVX-512 VNNI (cpu_isa_hardware() >= kAvx512Bf16).
//
// Arithmetic, per output y[i, r] (kernels/reference/matmul_quant_ref.h has the scalar twin it
// equals bit for bit): x row i is quantized by activation_q8_quantize (int8 q, one fp32 scale
// per 32 columns). Per 128-column block, in order, 16 fp32 lanes l (x block j = l / 4, part
// t = l % 4) take
//   s1 = exact int32 sum of code * q over columns 32j + 4t .. +3,  s2 = over 32j + 16 + 4t .. +3
//   groups of 32: acc[l] = fmaf(float(s1 + s2), scale[j] * xs[j], acc[l])
//   groups of 16: acc[l] = fmaf(float(s1), scale[2j] * xs[j], acc[l]);
//                 acc[l] = fmaf(float(s2), scale[2j + 1] * xs[j], acc[l])
//   then acc[l] = fmaf(min[l], xs[g(l)] * float(sum of q over group l), acc[l]) for the block's
//   groups l (4 or 8), and fmaf(0, 0, acc[l]) for the other lanes,
// and y = the fixed lane tree of kernels/internal/hsum_avx512.h. Every quantity depends on x
// row i and weight row r only, so results do not depend on n, other rows or the thread split.
// Error: |y - sum w x| <= sum_k |w_k| * amax(x block of k) / 254 plus fp32 accumulation.
//
// The 16-row tile layout (WeightLayout::kAffineTiles16, quant/affine_tiles.h) has its own
// arithmetic, shared by its VNNI GEMV / small-n kernel and its AMX-INT8 GEMM so that both give
// the same bits (ref::matmul_affine_groups_fp32 is the scalar twin): per output y[i, r], one
// fp32 chain over the weight groups g (16 or 32 columns) in column order:
//   S = exact int32 sum of code * q over the group (|S| <= 32 * 255 * 127 < 2^24: exact in fp32)
//   acc = fmaf(float(S), scale[g] * xs[b], acc)      (b: the group's 32-column x block)
//   acc = fmaf(min[g], term[g], acc)                  (term[g] = xs[b] * float(sum of q over g))
// and y = acc (acc starts at 0). scale and min are the stored fp32 values, or D * s and M * m.
#include <cstdint>
#include <type_traits>

#include "core/tensor_view.h"
#include "quant/activation_q8.h"

namespace densa::matmul_internal {

// Calls f(std::integral_constant<DType, t>{}) for affine dtype t (so kernels instantiate one
// template per dtype) and returns true; false for any other dtype.
template <typename F>
bool visit_affine_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kA8G32: f(std::integral_constant<DType, DType::kA8G32>{}); return true;
    case DType::kA4G32: f(std::integral_constant<DType, DType::kA4G32>{}); return true;
    case DType::kA4IQ4: f(std::integral_constant<DType, DType::kA4IQ4>{}); return true;
    case DType::kA4MXFP4: f(std::integral_constant<DType, DType::kA4MXFP4>{}); return true;
    case DType::kA8K16: f(std::integral_constant<DType, DType::kA8K16>{}); return true;
    case DType::kA8K32: f(std::integral_constant<DType, DType::kA8K32>{}); return true;
    case DType::kA4K: f(std::integral_constant<DType, DType::kA4K>{}); return true;
    case DType::kA4KIQ4: f(std::integral_constant<DType, DType::kA4KIQ4>{}); return true;
    default: return false;
  }
}

// Prepared bytes per 128 columns: 64 q (128-bit lane j: x block j's columns 0-15), 64 q
// (columns 16-31), 16 fp32 lane x scales, 16 fp32 group terms (xs * sum of q, zero-padded).
inline constexpr int64_t kAffineXStepBytes = 256;

inline int64_t affine_x_stride(int64_t cols) { return cols / 128 * kAffineXStepBytes; }

// One x row of `cols` (a multiple of 128) columns for weights of dtype t.
void affine_prepare_x(const float* x, int64_t cols, DType t, uint8_t* out);

// y[i, r] for x rows [0, n) and weight rows [r_begin, r_end); xp holds n prepared rows of
// x_stride bytes; y is [n, w.rows].
void affine_rows_avx512(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y,
                         int64_t r_begin, int64_t r_end);

// The tile layout's prepared x row: cols int8 q, then cols / 32 fp32 x scales, then one fp32
// term per weight group, padded to 64 bytes (affine_tiles_x_stride). Where a row's parts start:
struct AffineXRow {
  const int8_t* q;
  const float* xs;    // per 32 columns
  const float* term;  // per weight group
};

// Row i of prepared x rows of `x_stride` bytes (affine_tiles_x_stride) for `cols` columns.
inline AffineXRow affine_x_row(const uint8_t* xp, int64_t x_stride, int64_t cols, int64_t i) {
  const uint8_t* p = xp + i * x_stride;
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const float*>(p + cols),
          reinterpret_cast<const float*>(p + cols + 4 * (cols / kActQ8Block))};
}

// The stride of those rows, and one x row prepared into it.
int64_t affine_tiles_x_stride(DType t, int64_t cols);
void affine_tiles_prepare_x(const float* x, int64_t cols, DType t, uint8_t* out);

// affine_rows_avx512 for w in the 16-row tile layout; r_begin and r_end are multiples of 16.
// GEMMs (n >= 16) run their whole 16-row x tiles on AMX-INT8 where matmul_quant_int8_amx_usable().
void affine_tiles_rows_avx512(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y,
                              int64_t r_begin, int64_t r_end);

// The AVX2 kernels of the same arithmetic (kernels/matmul/matmul_affine_avx2.cpp), for CPUs
// without AVX-512: affine_tiles_prepare_x's bytes for one x row, and y[i, r] for x rows [0, n)
// and weight rows [r_begin, r_end) of w in the tile layout (whole 16-row tiles) or row-major.
// Both layouts give the tile kernels' bits (ref::matmul_affine_groups_fp32).
void affine_tiles_prepare_x_avx2(const float* x, int64_t cols, DType t, uint8_t* out);
void affine_rows_avx2(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y, int64_t r_begin,
                      int64_t r_end);

}  // namespace densa::matmul_internal
