#include "kernels/norm.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"

namespace densa {

// The sum of squares is accumulated in double (each square is exact there), which removes the
// only long fp32 reduction. It runs as 8 partial sums (element k in sum k % 8, then a fixed
// tree), which the compiler vectorizes: one serial chain of dim double adds was a few percent
// of a prefill step. The order depends only on dim, never on n or the thread split.
void rmsnorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * dim;
    float* yr = out + i * dim;
    double part[8] = {};
    int64_t k = 0;
    for (; k + 8 <= dim; k += 8) {
      for (int j = 0; j < 8; ++j) part[j] += static_cast<double>(xr[k + j]) * xr[k + j];
    }
    for (; k < dim; ++k) part[k % 8] += static_cast<double>(xr[k]) * xr[k];
    const double ss = ((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]));
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    for (int64_t k = 0; k < dim; ++k) yr[k] = w[k] * (xr[k] * inv);
  }
}

void rmsnorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out, ThreadPool* pool) {
  parallel_for_elems(pool, n, dim, [&](int64_t b, int64_t e) { rmsnorm(x + b * dim, w, e - b, dim, eps, out + b * dim); });
}

}  // namespace densa
