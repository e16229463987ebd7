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

#include <algorithm>

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

// Sums of 16 vectors, all at once: returns r with r[t] = sum of the lanes of the vector that
// x[slot(t)] holds, where slot u holds row 4 * (u % 4) + u / 4 (the tree below leaves slot u's
// sum at position 4 * (u % 4) + u / 4). A fixed tree: same order for every call.
DENSA_AVX512_INLINE __m512 transpose_reduce16(__m512* x) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i)  // 256-bit halves
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; ++i)  // 128-bit lanes
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i)  // pairs within a lane
    c[i] = _mm512_add_ps(_mm512_unpacklo_ps(b[2 * i], b[2 * i + 1]),
                         _mm512_unpackhi_ps(b[2 * i], b[2 * i + 1]));
  return _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 2, 3, 2)));
}

// The 16 scores of a tile for one query head as one vector: 16 independent accumulators (one
// per row, FMAs over head_dim), then one transpose-reduce. Rows >= num_rows are computed from
// whatever the tile buffer holds and masked off at the store.
DENSA_AVX512 void scores_avx512(const float* q, int group, const float* k, int num_rows,
                                int head_dim, const float* kscale, float* s) {
  const __mmask16 mask = num_rows >= kAttnTile ? static_cast<__mmask16>(0xffff)
                                               : static_cast<__mmask16>((1u << num_rows) - 1);
  const __m512 ksv = _mm512_maskz_loadu_ps(mask, kscale);
  for (int g = 0; g < group; ++g) {
    const float* qg = q + static_cast<int64_t>(g) * head_dim;
    __m512 acc[kAttnTile];
    for (int u = 0; u < kAttnTile; ++u) acc[u] = _mm512_setzero_ps();
    for (int d = 0; d < head_dim; d += 16) {
      const __m512 qd = _mm512_loadu_ps(qg + d);
      for (int u = 0; u < kAttnTile; ++u) {
        const int row = 4 * (u % 4) + u / 4;
        acc[u] = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k + static_cast<int64_t>(row) * head_dim + d),
                                 acc[u]);
      }
    }
    _mm512_mask_storeu_ps(s + g * kAttnTile, mask, _mm512_mul_ps(transpose_reduce16(acc), ksv));
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

// acc[g][d0 .. d0 + 16 NV) += sum_t w[g][t] * v[t][same], NV accumulators in registers, t in
// order 0 .. num_rows-1 per lane.
template <int NV>
DENSA_AVX512_INLINE void accumulate_block(const float* wg, const float* v, int num_rows,
                                          int head_dim, float* ag) {
  __m512 a[NV];
  for (int j = 0; j < NV; ++j) a[j] = _mm512_loadu_ps(ag + 16 * j);
  for (int t = 0; t < num_rows; ++t) {
    const __m512 w = _mm512_set1_ps(wg[t]);
    const float* vt = v + static_cast<int64_t>(t) * head_dim;
    for (int j = 0; j < NV; ++j) a[j] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vt + 16 * j), a[j]);
  }
  for (int j = 0; j < NV; ++j) _mm512_storeu_ps(ag + 16 * j, a[j]);
}

DENSA_AVX512 void accumulate_avx512(const float* w, int group, const float* v, int num_rows,
                                    int head_dim, float* acc) {
  for (int d0 = 0; d0 < head_dim; d0 += 128) {
    const int nv = std::min(8, (head_dim - d0) / 16);
    for (int g = 0; g < group; ++g) {
      const float* wg = w + g * kAttnTile;
      float* ag = acc + static_cast<int64_t>(g) * head_dim + d0;
      const float* vd = v + d0;
      switch (nv) {
        case 8: accumulate_block<8>(wg, vd, num_rows, head_dim, ag); break;
        case 7: accumulate_block<7>(wg, vd, num_rows, head_dim, ag); break;
        case 6: accumulate_block<6>(wg, vd, num_rows, head_dim, ag); break;
        case 5: accumulate_block<5>(wg, vd, num_rows, head_dim, ag); break;
        case 4: accumulate_block<4>(wg, vd, num_rows, head_dim, ag); break;
        case 3: accumulate_block<3>(wg, vd, num_rows, head_dim, ag); break;
        case 2: accumulate_block<2>(wg, vd, num_rows, head_dim, ag); break;
        default: accumulate_block<1>(wg, vd, num_rows, head_dim, ag); break;
      }
    }
  }
}

}  // namespace

const AttnTileOps kAvx512Ops{decode_rows_avx512, scores_avx512, exp_shift_avx512,
                             accumulate_avx512, 256.0f};

}  // namespace densa::attention_internal
