// matmul(): dispatch by ISA, the thread split over output rows, and the scalar kernel.
// The SIMD kernels live in matmul_avx2.cpp and matmul_avx512.cpp; the contract they share is
// described in kernels/internal/matmul_isa.h.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/internal/matmul_quant_fallback.h"
#include "quant/dequantize.h"

namespace densa {
namespace matmul_internal {

namespace {

// A thread task should cost at least this many byte-equivalents (see row_cost below) so that
// the wake-up cost of the pool (~10 us) stays small next to the work.
constexpr int64_t kMinTaskBytes = 256 * 1024;
// Row tiles of the SIMD kernels are at most 8 rows; keep chunks whole tiles.
constexpr int64_t kRowTile = 8;

bool matmul_supports(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0: return true;
    case DType::kFP8E4M3:
    case DType::kI4:
    case DType::kI8:
    case DType::kI32:
    case DType::kU8: return false;
  }
  return false;
}

MatmulRowsFn rows_fn(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return matmul_rows_scalar;
    case CpuIsa::kAvx2: return matmul_rows_avx2;
    case CpuIsa::kAvx512Bf16: return matmul_rows_avx512;
  }
  return matmul_rows_scalar;
}

// Scalar kernel: per (i, r), four fp32 accumulators; element j of a block goes to lane j % 4;
// the lanes are summed as (l0 + l1) + (l2 + l3). One weight block is decoded once and used for
// up to kScalarTile rows of x.
constexpr int kScalarTile = 4;

}  // namespace

void decode_elems(DType dtype, const uint8_t* row, int64_t begin, int64_t count, float* out) {
  // The reference dequantizer is exact for every unscaled dtype, so the scalar kernel shares it.
  // Scaled formats (FP8, INT4) never reach here: their scales are not part of a bare row.
  CHECK(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
        dtype == DType::kQ8_0 || dtype == DType::kQ4_0)
      << "matmul: unsupported weight dtype " << dtype_name(dtype);
  WeightView view;
  view.dtype = dtype;
  view.rows = 1;
  view.cols = begin + count;
  view.data = row;
  dequantize_row_range(view, 0, begin, count, out);
}

void matmul_rows_scalar(const WeightView& w, const float* x, int64_t n, float* y,
                        int64_t r_begin, int64_t r_end) {
  const int64_t cols = w.cols;
  for (int64_t r = r_begin; r < r_end; ++r) {
    const uint8_t* row = w.row_ptr(r);
    for (int64_t i0 = 0; i0 < n; i0 += kScalarTile) {
      const int nx = static_cast<int>(std::min<int64_t>(kScalarTile, n - i0));
      float acc[kScalarTile][4] = {};
      for (int64_t k0 = 0; k0 < cols; k0 += kBlockElems) {
        const int64_t len = std::min(kBlockElems, cols - k0);
        float wb[kBlockElems];
        decode_elems(w.dtype, row, k0, len, wb);
        for (int t = 0; t < nx; ++t) {
          const float* xr = x + (i0 + t) * cols + k0;
          for (int64_t j = 0; j < len; ++j) acc[t][j % 4] += wb[j] * xr[j];
        }
      }
      for (int t = 0; t < nx; ++t) y[(i0 + t) * w.rows + r] = (acc[t][0] + acc[t][1]) + (acc[t][2] + acc[t][3]);
    }
  }
}

void matmul_with_isa(CpuIsa isa, const WeightView& w, const float* x, int64_t n, float* y,
                     ThreadPool* pool) {
  // FP8 / INT4 weights: the AVX-512 kernel where it applies, else the reference-decoding
  // fallback.
  if (matmul_quant_fallback_supports(w.dtype)) {
    if (isa == CpuIsa::kAvx512Bf16 && matmul_quant_avx512_supports(w)) {
      CHECK(static_cast<int>(isa) <= static_cast<int>(cpu_isa_hardware())) << "matmul: isa " << cpu_isa_name(isa);
      return matmul_quant_avx512(w, x, n, y, pool);
    }
    return matmul_quant_fallback(w, x, n, y, pool);
  }
  CHECK(matmul_supports(w.dtype)) << "matmul: unsupported weight dtype " << dtype_name(w.dtype);
  CHECK(w.cols % dtype_block_elems(w.dtype) == 0) << "matmul: cols " << w.cols;
  CHECK(static_cast<int>(isa) <= static_cast<int>(cpu_isa_hardware())) << "matmul: isa " << cpu_isa_name(isa);
  if (n <= 0 || w.rows <= 0) return;
  const MatmulRowsFn fn = rows_fn(isa);
  if (pool == nullptr || pool->num_threads() == 1) {
    fn(w, x, n, y, 0, w.rows);
    return;
  }
  // Split over output rows only: each y[i, r] is computed whole by one thread.
  // Cost of one row in byte-equivalents: its weight bytes plus n * cols multiply-adds (one
  // multiply-add takes about as long as streaming one weight byte on one core).
  const int64_t row_cost = w.row_bytes() + n * w.cols;
  int64_t grain = std::max<int64_t>(1, kMinTaskBytes / std::max<int64_t>(1, row_cost));
  grain = (grain + kRowTile - 1) / kRowTile * kRowTile;
  pool->parallel_for(
      w.rows, [&](int64_t r_begin, int64_t r_end) { fn(w, x, n, y, r_begin, r_end); }, grain);
}

}  // namespace matmul_internal

void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  matmul_internal::matmul_with_isa(cpu_isa(), w, x, n, y, pool);
}

}  // namespace densa
