#pragma once
// exp(x) for 16 fp32 lanes, shared by the AVX-512 kernels (softmax weights in attention, the
// SwiGLU gate). Include only from files built with AVX-512F + FMA enabled for the caller
// (target attributes); the function carries its own attribute so it inlines into them.
//
// x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so that n ln2 is exact), degree-7 Taylor
// polynomial for exp(r) (truncation < 6e-9 relative), then scaled by 2^n with vscalefps, which
// overflows to +inf and underflows through the subnormals to 0 like std::exp. x is clamped to
// [-104, 104] first (exp overflows fp32 above 88.7 and underflows below -103.3), so +-inf give
// the same ends; a NaN lane gives 0 (vmaxps returns the bound), so a caller that must
// propagate NaN puts it back itself.
#include <immintrin.h>

#include "kernels/internal/target.h"

namespace densa::kernels_internal {

DENSA_TARGET_AVX512F_FMA_INLINE __m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(104.0f));  // NaN -> -104
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace densa::kernels_internal
