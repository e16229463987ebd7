#pragma once
// RMSNorm: out[i, :] = w * x[i, :] / sqrt(mean(x[i, :]^2) + eps), fp32. out may alias x.
#include <cstdint>

namespace densa {

void rmsnorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out);

}  // namespace densa
