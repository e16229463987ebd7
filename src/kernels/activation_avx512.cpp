// AVX-512 SwiGLU gate (see kernels/internal/activation_isa.h). Built for baseline x86-64 with a
// target attribute; only runs when the dispatcher has checked the CPU.
//
// exp(x): n = round(x / ln 2), r = x - n ln 2 in two steps (Cody-Waite: ln 2 = 0.693359375 -
// 2.12194440e-4, the first part exact in few bits so n * part is exact), |r| <= ln 2 / 2, then
// exp(r) = 1 + r + r^2 * P(r) with the Cephes single-precision coefficients, and 2^n applied by
// vscalefps, which overflows to +inf and underflows through the subnormals to 0 like std::exp.
// x is clamped to +-104 first (exp overflows float above 88.7 and underflows below -103.3), so
// +-inf inputs give the same ends. NaN gates give NaN, as the scalar loop does.
#include <immintrin.h>

#include "kernels/internal/activation_isa.h"

#define DENSA_AVX512 __attribute__((target("avx512f,avx512vl,fma")))
#define DENSA_AVX512_INLINE DENSA_AVX512 __attribute__((always_inline)) inline

namespace densa::activation_internal {
namespace {

DENSA_AVX512_INLINE __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(104.0f)), _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(e, n);
}

// 16 lanes (those in `mask`): gate = gate / (1 + exp(-gate)) * up, NaN gates kept NaN.
DENSA_AVX512_INLINE void silu_mul16(float* gate, const float* up, __mmask16 mask) {
  const __m512 g = _mm512_maskz_loadu_ps(mask, gate);
  const __m512 u = _mm512_maskz_loadu_ps(mask, up);
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
  __m512 y = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
  const __mmask16 nan = _mm512_cmp_ps_mask(g, g, _CMP_UNORD_Q);
  y = _mm512_mask_mov_ps(y, nan, g);
  _mm512_mask_storeu_ps(gate, mask, y);
}

}  // namespace

DENSA_AVX512 void silu_mul_avx512(float* gate, const float* up, int64_t count) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) silu_mul16(gate + i, up + i, 0xffff);
  if (i < count) silu_mul16(gate + i, up + i, static_cast<__mmask16>((1u << (count - i)) - 1));
}

}  // namespace densa::activation_internal
