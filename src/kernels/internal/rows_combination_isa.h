#pragma once
// Internals of kernels/rows_combination.h: the kernel per ISA level and the test hook that
// picks one.
#include <cstdint>

#include "core/cpu_features.h"

namespace densa::rows_combination_internal {

void rows_combination_scalar(const float* w, int64_t rows, int64_t cols, const float* x, int64_t x_stride, int64_t n,
                             float* y, int64_t y_stride);
void rows_combination_avx512(const float* w, int64_t rows, int64_t cols, const float* x, int64_t x_stride, int64_t n,
                             float* y, int64_t y_stride);
// rows_combination at a given ISA level (<= cpu_isa_hardware()).
void rows_combination_with_isa(CpuIsa isa, const float* w, int64_t rows, int64_t cols, const float* x,
                               int64_t x_stride, int64_t n, float* y, int64_t y_stride);

}  // namespace densa::rows_combination_internal
