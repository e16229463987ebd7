// AVX-512 SwiGLU gate (see kernels/internal/activation_isa.h). Built for baseline x86-64 with a
// target attribute; only runs when the dispatcher has checked the CPU.
//
// exp is kernels/internal/exp_avx512.h (the one attention's softmax uses); its clamp drops NaN,
// so NaN gates are put back afterwards and give NaN, as the scalar loop does.
// GCC 12 reports the intrinsics' own `__Y = __Y` placeholders as maybe-uninitialized once they
// are inlined into target-attributed code (as in the attention kernels); a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/internal/activation_isa.h"
#include "kernels/internal/exp_avx512.h"
#include "kernels/internal/target.h"

namespace densa::activation_internal {
namespace {

using kernels_internal::exp_ps;

// 16 lanes (those in `mask`): gate = gate / (1 + exp(-gate)) * up, NaN gates kept NaN.
DENSA_TARGET_AVX512_FMA_INLINE void silu_mul16(float* gate, const float* up, __mmask16 mask) {
  const __m512 g = _mm512_maskz_loadu_ps(mask, gate);
  const __m512 u = _mm512_maskz_loadu_ps(mask, up);
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
  __m512 y = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
  const __mmask16 nan = _mm512_cmp_ps_mask(g, g, _CMP_UNORD_Q);
  y = _mm512_mask_mov_ps(y, nan, g);
  _mm512_mask_storeu_ps(gate, mask, y);
}

}  // namespace

DENSA_TARGET_AVX512_FMA void silu_mul_avx512(float* gate, const float* up, int64_t count) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) silu_mul16(gate + i, up + i, 0xffff);
  if (i < count) silu_mul16(gate + i, up + i, static_cast<__mmask16>((1u << (count - i)) - 1));
}

}  // namespace densa::activation_internal
