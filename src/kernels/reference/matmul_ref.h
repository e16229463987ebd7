#pragma once
// Naive oracle for kernels/matmul.h: dequantize each weight row with the reference
// dequantizer, then accumulate in double.
#include <cstdint>

#include "core/tensor_view.h"

namespace densa::ref {

void matmul(const WeightView& w, const float* x, int64_t n, float* y);

}  // namespace densa::ref
