#pragma once
// Naive oracle for kernels/norm.h (double-precision arithmetic).
#include "kernels/norm.h"
namespace densa::ref {
void rmsnorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out);
}
