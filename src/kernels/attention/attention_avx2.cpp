// AVX2 tile primitives for paged attention (see kernels/internal/attention_isa.h), for CPUs
// without AVX-512: the AVX-512 primitives' algorithm on 8 fp32 lanes. Requires head_dim % 8 == 0
// and cpu_isa_hardware() >= kAvx2 (AVX2, FMA, F16C).
//
// FP8 e4m3 decodes through F16 as in attention_avx512.cpp (code << 7, plus bit 14 carried into
// the sign; the e4m3 value / 256, widened exactly by vcvtph2ps; fp8_unit folds the 256 into the
// row scales). Scores keep one accumulator per K row (two passes of 8 rows per tile) and reduce
// the 8 of a pass with a fixed tree; the softmax reduces a tile's 16 lanes with a fixed tree and
// takes exp from exp_avx2.h. The order is fixed per tile, so results do not depend on the batch,
// the run or the thread (the attention loop's contract); they differ in rounding from the scalar
// and AVX-512 paths, so a process uses one path per layout.
// GCC 12 false positives on the intrinsics' placeholders (see attention_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/internal/attention_isa.h"
#include "kernels/internal/exp_avx2.h"
#include "kernels/internal/target.h"

namespace densa::attention_internal {
namespace {

DENSA_TARGET_AVX2_F16C_INLINE __m256 fp8x8_to_ps(const uint8_t* p) {
  const __m128i x = _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 7);
  return _mm256_cvtph_ps(_mm_add_epi16(x, _mm_and_si128(x, _mm_set1_epi16(0x4000))));
}

DENSA_TARGET_AVX2_F16C_INLINE __m256 bf16x8_to_ps(const uint8_t* p) {
  const __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
}

// Lanes [8 j, 8 j + 8) of a row from element d0, j < NV, decoded to fp32.
template <int NV>
DENSA_TARGET_AVX2_F16C_INLINE void decode_lanes(const uint8_t* row, int d0, DType dtype, __m256* v) {
  if (dtype == DType::kFP8E4M3) {
    for (int j = 0; j < NV; ++j) v[j] = fp8x8_to_ps(row + d0 + 8 * j);
  } else if (dtype == DType::kBF16) {
    for (int j = 0; j < NV; ++j) v[j] = bf16x8_to_ps(row + 2 * (d0 + 8 * j));
  } else {
    const float* f = reinterpret_cast<const float*>(row);
    for (int j = 0; j < NV; ++j) v[j] = _mm256_loadu_ps(f + d0 + 8 * j);
  }
}

DENSA_TARGET_AVX2_F16C void decode_rows_avx2(const uint8_t* const* rows, int num_rows, int head_dim, DType dtype,
                                             float* dst) {
  for (int t = 0; t < num_rows; ++t) {
    float* out = dst + static_cast<int64_t>(t) * head_dim;
    for (int d = 0; d < head_dim; d += 8) {
      __m256 v[1];
      decode_lanes<1>(rows[t], d, dtype, v);
      _mm256_storeu_ps(out + d, v[0]);
    }
  }
}

// r[u] = the sum of x[u]'s 8 lanes, by one fixed tree for all 8 (pairwise hadds, then the two
// 128-bit halves).
DENSA_TARGET_AVX2_F16C_INLINE __m256 transpose_reduce8(const __m256* x) {
  const __m256 a0 = _mm256_hadd_ps(x[0], x[1]), a1 = _mm256_hadd_ps(x[2], x[3]);
  const __m256 a2 = _mm256_hadd_ps(x[4], x[5]), a3 = _mm256_hadd_ps(x[6], x[7]);
  const __m256 b0 = _mm256_hadd_ps(a0, a1), b1 = _mm256_hadd_ps(a2, a3);
  // b0: [x0 x1 x2 x3 | x0 x1 x2 x3] partial sums of the low and high 128-bit halves; b1 likewise.
  const __m256 lo = _mm256_permute2f128_ps(b0, b1, 0x20), hi = _mm256_permute2f128_ps(b0, b1, 0x31);
  return _mm256_add_ps(lo, hi);
}

// The tile's scores for one query head, 8 rows per pass: one accumulator per row (FMAs over
// head_dim), then transpose_reduce8. Rows >= num_rows are computed from whatever the tile buffer
// holds and not stored.
DENSA_TARGET_AVX2_F16C void scores_avx2(const float* q, int group, const float* k, int num_rows, int head_dim,
                                        const float* kscale, float* s) {
  for (int g = 0; g < group; ++g) {
    const float* qg = q + static_cast<int64_t>(g) * head_dim;
    for (int t0 = 0; t0 < num_rows; t0 += 8) {
      __m256 acc[8];
      for (int u = 0; u < 8; ++u) acc[u] = _mm256_setzero_ps();
      for (int d = 0; d < head_dim; d += 8) {
        const __m256 qd = _mm256_loadu_ps(qg + d);
        for (int u = 0; u < 8; ++u) {
          acc[u] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k + static_cast<int64_t>(t0 + u) * head_dim + d), acc[u]);
        }
      }
      alignas(32) float out[8];
      _mm256_store_ps(out, transpose_reduce8(acc));
      const int n = std::min(8, num_rows - t0);
      for (int u = 0; u < n; ++u) s[g * kAttnTile + t0 + u] = out[u] * kscale[t0 + u];
    }
  }
}

DENSA_TARGET_AVX2_F16C_INLINE float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

DENSA_TARGET_AVX2_F16C_INLINE float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// See AttnTileOps::softmax_update. A tile's 16 lanes as two vectors (lanes past n: -inf, whose
// weight is 0); max and sum reduce them by a fixed tree.
DENSA_TARGET_AVX2_F16C void softmax_update_avx2(float* s, int group, int n, int head_dim, const float* vscale,
                                                float* m, float* l, float* acc) {
  alignas(32) float vs[kAttnTile] = {};
  for (int t = 0; t < n; ++t) vs[t] = vscale[t];
  for (int g = 0; g < group; ++g) {
    float* sg = s + g * kAttnTile;
    alignas(32) float x[kAttnTile];
    for (int t = 0; t < kAttnTile; ++t) x[t] = t < n ? sg[t] : -std::numeric_limits<float>::infinity();
    const __m256 x0 = _mm256_load_ps(x), x1 = _mm256_load_ps(x + 8);
    const float mx = std::max(m[g], hmax8(_mm256_max_ps(x0, x1)));
    if (mx > m[g]) {
      const float c = std::exp(m[g] - mx);  // 0 on the first tile
      l[g] *= c;
      const __m256 cv = _mm256_set1_ps(c);
      float* ag = acc + static_cast<int64_t>(g) * head_dim;
      for (int d = 0; d < head_dim; d += 8) _mm256_storeu_ps(ag + d, _mm256_mul_ps(cv, _mm256_loadu_ps(ag + d)));
      m[g] = mx;
    }
    const __m256 mv = _mm256_set1_ps(mx);
    const __m256 p0 = kernels_internal::exp_ps_avx2(_mm256_sub_ps(x0, mv));
    const __m256 p1 = kernels_internal::exp_ps_avx2(_mm256_sub_ps(x1, mv));
    // exp_ps_avx2 clamps -inf to -104, whose exp is 0 in fp32: the padding lanes add nothing.
    l[g] += hsum8(_mm256_add_ps(p0, p1));
    alignas(32) float w[kAttnTile];
    _mm256_store_ps(w, _mm256_mul_ps(p0, _mm256_load_ps(vs)));
    _mm256_store_ps(w + 8, _mm256_mul_ps(p1, _mm256_load_ps(vs + 8)));
    std::memcpy(sg, w, static_cast<size_t>(n) * 4);
  }
}

// acc[g][d0 .. d0 + 8 NV) += sum_t w[g][t] * v[t][same], NV accumulators, t in order per lane.
template <int NV>
DENSA_TARGET_AVX2_F16C_INLINE void accumulate_block(const float* wg, const float* v, int num_rows, int head_dim,
                                                    float* ag) {
  __m256 a[NV];
  for (int j = 0; j < NV; ++j) a[j] = _mm256_loadu_ps(ag + 8 * j);
  for (int t = 0; t < num_rows; ++t) {
    const __m256 w = _mm256_set1_ps(wg[t]);
    const float* vt = v + static_cast<int64_t>(t) * head_dim;
    for (int j = 0; j < NV; ++j) a[j] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vt + 8 * j), a[j]);
  }
  for (int j = 0; j < NV; ++j) _mm256_storeu_ps(ag + 8 * j, a[j]);
}

DENSA_TARGET_AVX2_F16C void accumulate_avx2(const float* w, int group, const float* v, int num_rows, int head_dim,
                                            float* acc) {
  for (int g = 0; g < group; ++g) {
    const float* wg = w + g * kAttnTile;
    float* ag = acc + static_cast<int64_t>(g) * head_dim;
    int d0 = 0;
    for (; d0 + 64 <= head_dim; d0 += 64) accumulate_block<8>(wg, v + d0, num_rows, head_dim, ag + d0);
    for (; d0 < head_dim; d0 += 8) accumulate_block<1>(wg, v + d0, num_rows, head_dim, ag + d0);
  }
}

// The same sum over raw cache rows, each row's lanes decoded in registers once for G heads.
template <int G, int NV>
DENSA_TARGET_AVX2_F16C_INLINE void accumulate_rows_block(const float* w, const uint8_t* const* rows, int num_rows,
                                                         int head_dim, int d0, DType dtype, float* acc) {
  __m256 a[G][NV];
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < NV; ++j) a[g][j] = _mm256_loadu_ps(acc + static_cast<int64_t>(g) * head_dim + d0 + 8 * j);
  for (int t = 0; t < num_rows; ++t) {
    __m256 v[NV];
    decode_lanes<NV>(rows[t], d0, dtype, v);
    for (int g = 0; g < G; ++g) {
      const __m256 wv = _mm256_set1_ps(w[g * kAttnTile + t]);
      for (int j = 0; j < NV; ++j) a[g][j] = _mm256_fmadd_ps(wv, v[j], a[g][j]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < NV; ++j) _mm256_storeu_ps(acc + static_cast<int64_t>(g) * head_dim + d0 + 8 * j, a[g][j]);
}

// Lane blocks of 32 (G <= 2) or 8, so that G x NV accumulators stay in 16 registers.
template <int G>
DENSA_TARGET_AVX2_F16C_INLINE void accumulate_rows_g(const float* w, const uint8_t* const* rows, int num_rows,
                                                     int head_dim, DType dtype, float* acc) {
  int d0 = 0;
  if constexpr (G <= 2) {
    for (; d0 + 32 <= head_dim; d0 += 32) accumulate_rows_block<G, 4>(w, rows, num_rows, head_dim, d0, dtype, acc);
  }
  for (; d0 < head_dim; d0 += 8) accumulate_rows_block<G, 1>(w, rows, num_rows, head_dim, d0, dtype, acc);
}

DENSA_TARGET_AVX2_F16C void accumulate_rows_avx2(const float* w, int group, const uint8_t* const* rows, int num_rows,
                                                 int head_dim, DType dtype, float* acc) {
  int g0 = 0;
  for (; g0 + 8 <= group; g0 += 8) {
    accumulate_rows_g<8>(w + g0 * kAttnTile, rows, num_rows, head_dim, dtype, acc + static_cast<int64_t>(g0) * head_dim);
  }
  for (; g0 + 2 <= group; g0 += 2) {
    accumulate_rows_g<2>(w + g0 * kAttnTile, rows, num_rows, head_dim, dtype, acc + static_cast<int64_t>(g0) * head_dim);
  }
  if (g0 < group) {
    accumulate_rows_g<1>(w + g0 * kAttnTile, rows, num_rows, head_dim, dtype, acc + static_cast<int64_t>(g0) * head_dim);
  }
}

}  // namespace

const AttnTileOps kAvx2Ops{decode_rows_avx2, scores_avx2,          softmax_update_avx2,
                           accumulate_avx2,  accumulate_rows_avx2, 256.0f};

}  // namespace densa::attention_internal
