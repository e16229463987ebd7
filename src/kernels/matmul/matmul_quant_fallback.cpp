// Fallback matmul for FP8 / INT4 / INT8 / affine 8-bit weights. Per output element y[i, r] the reduction order is
// fixed: the row is walked left to right, element k goes to accumulator lane k % 4, and the
// lanes are summed as (l0 + l1) + (l2 + l3). Weights are decoded in chunks of kChunk elements
// into a stack buffer and reused for a tile of up to kTile rows of x; neither the chunking nor
// the tiling changes any (i, r) chain, so results do not depend on n or the thread split.
#include "kernels/internal/matmul_quant_fallback.h"

#include <algorithm>

#include "core/check.h"
#include "quant/affine_rows.h"
#include "quant/dequantize.h"

namespace densa::matmul_internal {
namespace {

constexpr int64_t kChunk = 256;  // multiple of every block/group alignment dequantize needs
constexpr int kTile = 8;

void rows_kernel(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin, int64_t r_end) {
  const int64_t cols = w.cols;
  float wb[kChunk];
  for (int64_t r = r_begin; r < r_end; ++r) {
    for (int64_t i0 = 0; i0 < n; i0 += kTile) {
      const int nx = static_cast<int>(std::min<int64_t>(kTile, n - i0));
      float acc[kTile][4] = {};
      for (int64_t k0 = 0; k0 < cols; k0 += kChunk) {
        const int64_t len = std::min(kChunk, cols - k0);
        dequantize_row_range(w, r, k0, len, wb);
        for (int t = 0; t < nx; ++t) {
          const float* xr = x + (i0 + t) * cols + k0;
          // k0 is a multiple of 4, so lane (k0 + j) % 4 == j % 4.
          for (int64_t j = 0; j < len; ++j) acc[t][j % 4] += wb[j] * xr[j];
        }
      }
      for (int t = 0; t < nx; ++t) y[(i0 + t) * w.rows + r] = (acc[t][0] + acc[t][1]) + (acc[t][2] + acc[t][3]);
    }
  }
}

}  // namespace

bool matmul_quant_fallback_supports(DType t) {
  return t == DType::kFP8E4M3 || t == DType::kI4 || t == DType::kI8 || is_affine_rows(t);
}

void matmul_quant_fallback_rows(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin,
                                int64_t r_end) {
  CHECK(matmul_quant_fallback_supports(w.dtype)) << "matmul fallback: dtype " << dtype_name(w.dtype);
  if (is_affine_rows(w.dtype)) {  // self-contained rows or 16-row tiles (dequantize_row_range reads both)
    CHECK((w.layout == WeightLayout::kRows || w.layout == WeightLayout::kAffineTiles16) && w.cols % kAffineBlock == 0) << "matmul fallback: affine8 cols " << w.cols;
  } else {
    CHECK(w.dtype == DType::kFP8E4M3 ? w.scales_f32 != nullptr : (w.scales_bf16 != nullptr || w.scales_f16 != nullptr))
        << "matmul fallback: missing scales";
    CHECK(w.scale_rows > 0 && w.scale_cols > 0) << "matmul fallback: scale block " << w.scale_rows << "x" << w.scale_cols;
    CHECK(w.cols % 2 == 0) << "matmul fallback: cols " << w.cols;
  }
  if (n <= 0 || r_begin >= r_end) return;
  rows_kernel(w, x, n, y, r_begin, r_end);
}

int64_t matmul_quant_fallback_row_cost(const WeightView& w, int64_t n) {
  return w.row_bytes() + n * w.cols * 2;  // decoding costs about one more pass
}

}  // namespace densa::matmul_internal
