#include "kernels/norm.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"

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

void rmsnorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out, ThreadPool* pool) {
  constexpr int64_t kMinElemsPerThread = int64_t{1} << 15;
  if (pool == nullptr || pool->num_threads() == 1 || n * dim < 2 * kMinElemsPerThread) {
    return rmsnorm(x, w, n, dim, eps, out);
  }
  pool->parallel_for(n, [&](int64_t b, int64_t e) { rmsnorm(x + b * dim, w, e - b, dim, eps, out + b * dim); },
                     std::max<int64_t>(1, kMinElemsPerThread / dim));
}

}  // namespace densa
