#pragma once
// The horizontal sum every AVX-512 matmul kernel ends a row with, in one fixed tree so that the
// kernels and their scalar twins agree bit for bit: (256-bit halves), (128-bit halves), lanes
// (0 + 2, 1 + 3), then (0 + 1). Lane terms: t[l] = v[l] + v[l + 8] (l < 8), u[l] = t[l] + t[l + 4]
// (l < 4), result (u0 + u2) + (u1 + u3). Include only from files built for AVX-512 callers.
#include <immintrin.h>

#include "kernels/internal/target.h"

namespace densa::kernels_internal {

DENSA_TARGET_AVX512F_INLINE float hsum_avx512(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4e));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xb1));
  __m128 s = _mm512_castps512_ps128(v);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace densa::kernels_internal
