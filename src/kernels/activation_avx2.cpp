// AVX2 SwiGLU gate (see kernels/internal/activation_isa.h): silu_mul_avx512's arithmetic on 8
// lanes. exp is exp_avx2.h, exp_avx512.h's twin bit for bit, and the rest is the same
// correctly rounded operations, so the two kernels give the same bits. The tail runs through a
// zero-padded 8-lane buffer, so an element's result does not depend on where it sits.
// GCC 12 false positives on the intrinsics' placeholders (see activation_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/internal/activation_isa.h"
#include "kernels/internal/exp_avx2.h"
#include "kernels/internal/target.h"

namespace densa::activation_internal {
namespace {

// gate = gate / (1 + exp(-gate)) * up for 8 lanes, NaN gates kept NaN.
DENSA_TARGET_AVX2_F16C_INLINE __m256 silu_mul8(__m256 g, __m256 u) {
  const __m256 e = kernels_internal::exp_ps_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
  const __m256 y = _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
  return _mm256_blendv_ps(y, g, _mm256_cmp_ps(g, g, _CMP_UNORD_Q));
}

}  // namespace

DENSA_TARGET_AVX2_F16C void silu_mul_avx2(float* gate, const float* up, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) _mm256_storeu_ps(gate + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < count) {
    alignas(32) float g[8] = {}, u[8] = {};
    const size_t rest = static_cast<size_t>(count - i) * 4;
    std::memcpy(g, gate + i, rest);
    std::memcpy(u, up + i, rest);
    _mm256_store_ps(g, silu_mul8(_mm256_load_ps(g), _mm256_load_ps(u)));
    std::memcpy(gate + i, g, rest);
  }
}

}  // namespace densa::activation_internal
