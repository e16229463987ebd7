#include "kernels/reference/norm_ref.h"

#include <cmath>

namespace densa::ref {

void rmsnorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0.0;
    for (int64_t k = 0; k < dim; ++k) ss += static_cast<double>(x[i * dim + k]) * x[i * dim + k];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + static_cast<double>(eps));
    for (int64_t k = 0; k < dim; ++k) {
      out[i * dim + k] = static_cast<float>(static_cast<double>(w[k]) * x[i * dim + k] * inv);
    }
  }
}

}  // namespace densa::ref
