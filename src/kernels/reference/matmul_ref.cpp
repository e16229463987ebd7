#include "kernels/reference/matmul_ref.h"

#include <vector>

#include "quant/dequantize.h"

namespace densa::ref {

void matmul(const WeightView& w, const float* x, int64_t n, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = x + i * w.cols;
      double acc = 0.0;
      for (int64_t k = 0; k < w.cols; ++k) acc += static_cast<double>(row[k]) * xr[k];
      y[i * w.rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace densa::ref
