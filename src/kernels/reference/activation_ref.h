#pragma once
// Naive oracle for kernels/activation.h (double-precision arithmetic).
#include "kernels/activation.h"
namespace densa::ref {
void silu_mul(float* gate, const float* up, int64_t count);
void softmax(float* x, int64_t count);
}
