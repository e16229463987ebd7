#include "kernels/norm.h"

#include <cmath>

namespace densa {

// The sum of squares is accumulated in double (dim is at most a few thousand, so this costs
// nothing next to the matmuls around it and removes the only long fp32 reduction).
void rmsnorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * dim;
    float* yr = out + i * dim;
    double ss = 0.0;
    for (int64_t k = 0; k < dim; ++k) ss += static_cast<double>(xr[k]) * xr[k];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    for (int64_t k = 0; k < dim; ++k) yr[k] = w[k] * (xr[k] * inv);
  }
}

}  // namespace densa
