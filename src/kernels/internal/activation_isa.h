#pragma once
// Internals of kernels/activation.h: silu_mul per ISA level, and the test hook that picks one.
//
// The scalar loop uses std::exp; the AVX-512 kernel evaluates exp with a degree-7 polynomial
// after range reduction (kernels/internal/exp_avx512.h) for 16 lanes at a time, the
// tail in the same vector code under a mask, so every element of a call gets the same
// arithmetic wherever it sits: the result of one token never depends on the batch around it.
// The AVX2 kernel is its twin on 8 lanes (exp_avx2.h), the same bits.
#include <cstdint>

#include "core/cpu_features.h"

namespace densa::activation_internal {

void silu_mul_scalar(float* gate, const float* up, int64_t count);
void silu_mul_avx2(float* gate, const float* up, int64_t count);
void silu_mul_avx512(float* gate, const float* up, int64_t count);
// silu_mul at a given ISA level (<= cpu_isa_hardware()).
void silu_mul_with_isa(CpuIsa isa, float* gate, const float* up, int64_t count);

}  // namespace densa::activation_internal
