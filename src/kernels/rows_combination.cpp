#include "kernels/rows_combination.h"

#include <cmath>

#include "core/check.h"
#include "kernels/internal/rows_combination_isa.h"

namespace densa {
namespace rows_combination_internal {

void rows_combination_scalar(const float* w, int64_t rows, int64_t cols, const float* x, int64_t x_stride, int64_t n,
                             float* y, int64_t y_stride) {
  for (int64_t t = 0; t < n; ++t) {
    float* yt = y + t * y_stride;
    for (int64_t c = 0; c < cols; ++c) yt[c] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float xr = x[t * x_stride + r];
      const float* wr = w + r * cols;
      for (int64_t c = 0; c < cols; ++c) yt[c] = std::fma(xr, wr[c], yt[c]);
    }
  }
}

void rows_combination_with_isa(CpuIsa isa, const float* w, int64_t rows, int64_t cols, const float* x,
                               int64_t x_stride, int64_t n, float* y, int64_t y_stride) {
  CHECK(static_cast<int>(isa) <= static_cast<int>(cpu_isa_hardware()))
      << "rows_combination: isa " << cpu_isa_name(isa);
  if (isa == CpuIsa::kAvx512Bf16) return rows_combination_avx512(w, rows, cols, x, x_stride, n, y, y_stride);
  rows_combination_scalar(w, rows, cols, x, x_stride, n, y, y_stride);
}

}  // namespace rows_combination_internal

void rows_combination(const float* w, int64_t rows, int64_t cols, const float* x, int64_t x_stride, int64_t n,
                      float* y, int64_t y_stride) {
  rows_combination_internal::rows_combination_with_isa(cpu_isa(), w, rows, cols, x, x_stride, n, y, y_stride);
}

}  // namespace densa
