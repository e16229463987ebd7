// AVX-512 tile primitives for paged attention (see kernels/internal/attention_isa.h).
// The project builds for baseline x86-64, so every function here carries a target attribute
// and only runs when the dispatcher has checked the CPU. Requires head_dim % 16 == 0.
//
// FP8 e4m3 decodes through F16: the code's sign goes to bit 15 and its 7 exponent+mantissa
// bits to bits 13..7, which is an F16 number equal to the e4m3 value / 256 (normals and
// subnormals alike, the bias differs by 8); vcvtph2ps then widens it exactly. The 256 is
// folded into the row scale (fp8_unit). kv_store never writes the NaN codes 0x7f / 0xff for
// finite inputs; they would decode as 480 here.
// GCC 12 reports the intrinsics' own `__Y = __Y` placeholders as maybe-uninitialized once
// they are inlined into target-attributed code; the warning is a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/internal/attention_isa.h"

#define DENSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")))
#define DENSA_AVX512_INLINE DENSA_AVX512 __attribute__((always_inline)) inline

namespace densa::attention_internal {
namespace {

DENSA_AVX512_INLINE __m512 fp8x16_to_ps(const uint8_t* p) {
  const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
  const __m256i mag = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7f)), 7);
  return _mm512_cvtph_ps(_mm256_or_si256(sign, mag));
}

DENSA_AVX512_INLINE __m512 bf16x16_to_ps(const uint8_t* p) {
  const __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
}

// exp(x) for x <= 0 (softmax weights): x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for
// an exact n ln2), degree-7 Taylor polynomial for exp(r) (truncation < 6e-9 relative), then
// scaled by 2^n. Inputs below -104 give 0.
DENSA_AVX512_INLINE __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
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

DENSA_AVX512 void decode_rows_avx512(const uint8_t* const* rows, int num_rows, int head_dim,
                                     DType dtype, float* dst) {
  for (int t = 0; t < num_rows; ++t) {
    float* out = dst + static_cast<int64_t>(t) * head_dim;
    const uint8_t* src = rows[t];
    if (dtype == DType::kFP8E4M3) {
      for (int d = 0; d < head_dim; d += 16) _mm512_storeu_ps(out + d, fp8x16_to_ps(src + d));
    } else if (dtype == DType::kBF16) {
      for (int d = 0; d < head_dim; d += 16) _mm512_storeu_ps(out + d, bf16x16_to_ps(src + 2 * d));
    } else {
      const float* f = reinterpret_cast<const float*>(src);
      for (int d = 0; d < head_dim; d += 16) _mm512_storeu_ps(out + d, _mm512_loadu_ps(f + d));
    }
  }
}

DENSA_AVX512 void scores_avx512(const float* q, int group, const float* k, int num_rows,
                                int head_dim, const float* kscale, float* s) {
  for (int g = 0; g < group; ++g) {
    const float* qg = q + static_cast<int64_t>(g) * head_dim;
    for (int t = 0; t < num_rows; ++t) {
      const float* kt = k + static_cast<int64_t>(t) * head_dim;
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
      int d = 0;
      for (; d + 32 <= head_dim; d += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qg + d), _mm512_loadu_ps(kt + d), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qg + d + 16), _mm512_loadu_ps(kt + d + 16), a1);
      }
      if (d < head_dim) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qg + d), _mm512_loadu_ps(kt + d), a0);
      s[g * kAttnTile + t] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * kscale[t];
    }
  }
}

DENSA_AVX512 void exp_shift_avx512(float* p, int n, float m) {
  const __m512 mv = _mm512_set1_ps(m);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 mask = n - i >= 16 ? static_cast<__mmask16>(0xffff)
                                       : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(mask, p + i);
    _mm512_mask_storeu_ps(p + i, mask, exp_ps(_mm512_sub_ps(x, mv)));
  }
}

DENSA_AVX512 void accumulate_avx512(const float* w, int group, const float* v, int num_rows,
                                    int head_dim, float* acc) {
  for (int d = 0; d < head_dim; d += 16) {
    for (int g = 0; g < group; ++g) {
      float* ag = acc + static_cast<int64_t>(g) * head_dim + d;
      const float* wg = w + g * kAttnTile;
      __m512 a = _mm512_loadu_ps(ag);
      for (int t = 0; t < num_rows; ++t)
        a = _mm512_fmadd_ps(_mm512_set1_ps(wg[t]), _mm512_loadu_ps(v + static_cast<int64_t>(t) * head_dim + d), a);
      _mm512_storeu_ps(ag, a);
    }
  }
}

}  // namespace

const AttnTileOps kAvx512Ops{decode_rows_avx512, scores_avx512, exp_shift_avx512,
                             accumulate_avx512, 256.0f};

}  // namespace densa::attention_internal
