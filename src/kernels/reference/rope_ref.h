#pragma once
// Naive oracle for kernels/rope.h (double-precision arithmetic).
#include "kernels/rope.h"
namespace densa::ref {
void rope_neox(float* x, const int32_t* positions, int64_t n, int num_heads, int head_dim, float theta,
               int rotary_dim = 0);
}
