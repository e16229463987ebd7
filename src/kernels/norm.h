#pragma once
// RMSNorm: out[i, :] = w * x[i, :] / sqrt(mean(x[i, :]^2) + eps), fp32. out may alias x.
#include <cstdint>

namespace densa {

class ThreadPool;

void rmsnorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out);
// The same with the rows split over the pool when there are enough of them (a prefill step):
// each row's result is the one above, whatever thread computes it.
void rmsnorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out, ThreadPool* pool);

}  // namespace densa
