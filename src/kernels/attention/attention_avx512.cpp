// AVX-512 tile primitives for paged attention (see kernels/internal/attention_isa.h).
// The project builds for baseline x86-64, so every function here carries a target attribute
// and only runs when the dispatcher has checked the CPU. Requires head_dim % 16 == 0.
//
// FP8 e4m3 decodes through F16: the code's sign goes to bit 15 and its 7 exponent+mantissa
// bits to bits 13..7, which is an F16 number equal to the e4m3 value / 256 (normals and
// subnormals alike, the bias differs by 8); vcvtph2ps then widens it exactly. The 256 is
// folded into the row scale (fp8_unit). The bit move is x = code << 7 (sign lands on bit 14)
// plus x & 0x4000 (a set bit 14 carries into bit 15 and clears itself): three 16-bit lane
// ops for 32 codes. kv_store never writes the NaN codes 0x7f / 0xff for finite inputs; they
// would decode as 480 here.
// GCC 12 reports the intrinsics' own `__Y = __Y` placeholders as maybe-uninitialized once
// they are inlined into target-attributed code; the warning is a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/internal/attention_isa.h"
#include "kernels/internal/exp_avx512.h"
#include "kernels/internal/target.h"

namespace densa::attention_internal {
namespace {

DENSA_TARGET_AVX512_BF16_INLINE __m512 fp8x16_to_ps(const uint8_t* p) {
  const __m256i x = _mm256_slli_epi16(
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 7);
  return _mm512_cvtph_ps(_mm256_add_epi16(x, _mm256_and_si256(x, _mm256_set1_epi16(0x4000))));
}

// 32 codes: elements 0..15 in lo, 16..31 in hi.
DENSA_TARGET_AVX512_BF16_INLINE void fp8x32_to_ps(const uint8_t* p, __m512& lo, __m512& hi) {
  const __m512i x = _mm512_slli_epi16(
      _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 7);
  const __m512i h = _mm512_add_epi16(x, _mm512_and_si512(x, _mm512_set1_epi16(0x4000)));
  lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}

DENSA_TARGET_AVX512_BF16_INLINE __m512 bf16x16_to_ps(const uint8_t* p) {
  const __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
}

// exp(x) for the softmax weights (x <= 0): kernels/internal/exp_avx512.h.
using kernels_internal::exp_ps;

// Lanes [16 j, 16 j + 16) of a row, j < NV, decoded to fp32 (NV even for fp8 past 16 lanes).
template <int NV>
DENSA_TARGET_AVX512_BF16_INLINE void decode_lanes(const uint8_t* row, int d0, DType dtype, __m512* v) {
  if (dtype == DType::kFP8E4M3) {
    if constexpr (NV == 1) {
      v[0] = fp8x16_to_ps(row + d0);
    } else {
      for (int j = 0; j < NV; j += 2) fp8x32_to_ps(row + d0 + 16 * j, v[j], v[j + 1]);
    }
  } else if (dtype == DType::kBF16) {
    for (int j = 0; j < NV; ++j) v[j] = bf16x16_to_ps(row + 2 * (d0 + 16 * j));
  } else {
    const float* f = reinterpret_cast<const float*>(row);
    for (int j = 0; j < NV; ++j) v[j] = _mm512_loadu_ps(f + d0 + 16 * j);
  }
}

DENSA_TARGET_AVX512_BF16 void decode_rows_avx512(const uint8_t* const* rows, int num_rows, int head_dim,
                                                 DType dtype, float* dst) {
  for (int t = 0; t < num_rows; ++t) {
    float* out = dst + static_cast<int64_t>(t) * head_dim;
    const uint8_t* src = rows[t];
    int d = 0;
    for (; d + 32 <= head_dim; d += 32) {
      __m512 v[2];
      decode_lanes<2>(src, d, dtype, v);
      _mm512_storeu_ps(out + d, v[0]);
      _mm512_storeu_ps(out + d + 16, v[1]);
    }
    if (d < head_dim) {
      __m512 v[1];
      decode_lanes<1>(src, d, dtype, v);
      _mm512_storeu_ps(out + d, v[0]);
    }
  }
}

// Sums of 16 vectors, all at once: returns r with r[t] = sum of the lanes of the vector that
// x[slot(t)] holds, where slot u holds row 4 * (u % 4) + u / 4 (the tree below leaves slot u's
// sum at position 4 * (u % 4) + u / 4). A fixed tree: same order for every call.
DENSA_TARGET_AVX512_BF16_INLINE __m512 transpose_reduce16(__m512* x) {
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
// per row, FMAs over head_dim), then one transpose-reduce.
DENSA_TARGET_AVX512_BF16_INLINE __m512 scores_one_head(const float* qg, const float* k, int head_dim) {
  __m512 acc[kAttnTile];
  for (int u = 0; u < kAttnTile; ++u) acc[u] = _mm512_setzero_ps();
  for (int d = 0; d < head_dim; d += 16) {
    const __m512 qd = _mm512_loadu_ps(qg + d);
    for (int u = 0; u < kAttnTile; ++u) {
      const int row = 4 * (u % 4) + u / 4;
      acc[u] = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k + static_cast<int64_t>(row) * head_dim + d), acc[u]);
    }
  }
  return transpose_reduce16(acc);
}

// Rows [k0, k0 + 8) for two query heads as one vector: lanes 0-7 head a's, lanes 8-15 head b's.
// Each row is loaded once for both heads. transpose_reduce16 sums every slot's 16 lanes by the
// same tree, so each score has the bits of scores_one_head's.
DENSA_TARGET_AVX512_BF16_INLINE __m512 scores_two_heads(const float* qa, const float* qb, const float* k, int k0,
                                                        int head_dim) {
  __m512 acc[kAttnTile];
  for (int u = 0; u < kAttnTile; ++u) acc[u] = _mm512_setzero_ps();
  for (int d = 0; d < head_dim; d += 16) {
    const __m512 qad = _mm512_loadu_ps(qa + d), qbd = _mm512_loadu_ps(qb + d);
    for (int j = 0; j < 8; ++j) {
      const __m512 kr = _mm512_loadu_ps(k + static_cast<int64_t>(k0 + j) * head_dim + d);
      // The slot whose sum lands at position p is 4 (p % 4) + p / 4.
      constexpr auto slot = [](int p) { return 4 * (p % 4) + p / 4; };
      acc[slot(j)] = _mm512_fmadd_ps(qad, kr, acc[slot(j)]);
      acc[slot(8 + j)] = _mm512_fmadd_ps(qbd, kr, acc[slot(8 + j)]);
    }
  }
  return transpose_reduce16(acc);
}

// Heads in pairs (scores_two_heads, one or two halves of the tile as num_rows needs), a last
// odd head alone. Rows >= num_rows are computed from whatever the tile buffer holds and masked
// off at the store.
DENSA_TARGET_AVX512_BF16 void scores_avx512(const float* q, int group, const float* k, int num_rows,
                                            int head_dim, const float* kscale, float* s) {
  const __mmask16 mask = num_rows >= kAttnTile ? static_cast<__mmask16>(0xffff)
                                               : static_cast<__mmask16>((1u << num_rows) - 1);
  const __m512 ksv = _mm512_maskz_loadu_ps(mask, kscale);
  int g = 0;
  for (; g + 1 < group; g += 2) {
    const float* qa = q + static_cast<int64_t>(g) * head_dim;
    const float* qb = qa + head_dim;
    for (int k0 = 0; k0 < num_rows; k0 += 8) {
      const __mmask16 half = static_cast<__mmask16>((mask >> k0) & 0xff);
      // Lanes 0-7 and 8-15 both scaled by rows [k0, k0 + 8)'s scales.
      const __m512 ks = k0 == 0 ? _mm512_shuffle_f32x4(ksv, ksv, 0x44) : _mm512_shuffle_f32x4(ksv, ksv, 0xEE);
      const __m512 r = _mm512_mul_ps(scores_two_heads(qa, qb, k, k0, head_dim), ks);
      _mm512_mask_storeu_ps(s + g * kAttnTile + k0, half, r);
      _mm512_mask_storeu_ps(s + (g + 1) * kAttnTile + k0 - 8, static_cast<__mmask16>(half << 8), r);
    }
  }
  if (g < group) {
    const __m512 r = _mm512_mul_ps(scores_one_head(q + static_cast<int64_t>(g) * head_dim, k, head_dim), ksv);
    _mm512_mask_storeu_ps(s + g * kAttnTile, mask, r);
  }
}

// See AttnTileOps::softmax_update. The max and the sum reduce the tile's 16 lanes in a fixed
// tree (_mm512_reduce_*), so the result depends only on the tile's values.
DENSA_TARGET_AVX512_BF16 void softmax_update_avx512(float* s, int group, int n, int head_dim,
                                                    const float* vscale, float* m, float* l, float* acc) {
  const __mmask16 mask = n >= kAttnTile ? static_cast<__mmask16>(0xffff)
                                        : static_cast<__mmask16>((1u << n) - 1);
  const __m512 vsv = _mm512_maskz_loadu_ps(mask, vscale);
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int g = 0; g < group; ++g) {
    float* sg = s + g * kAttnTile;
    const __m512 x = _mm512_mask_loadu_ps(neg_inf, mask, sg);
    const float mx = std::max(m[g], _mm512_reduce_max_ps(x));
    if (mx > m[g]) {
      const float c = std::exp(m[g] - mx);  // 0 on the first tile
      l[g] *= c;
      const __m512 cv = _mm512_set1_ps(c);
      float* ag = acc + static_cast<int64_t>(g) * head_dim;
      for (int d = 0; d < head_dim; d += 16) _mm512_storeu_ps(ag + d, _mm512_mul_ps(cv, _mm512_loadu_ps(ag + d)));
      m[g] = mx;
    }
    const __m512 p = _mm512_maskz_mov_ps(mask, exp_ps(_mm512_sub_ps(x, _mm512_set1_ps(mx))));
    l[g] += _mm512_reduce_add_ps(p);
    _mm512_mask_storeu_ps(sg, mask, _mm512_mul_ps(p, vsv));
  }
}

// acc[g][d0 .. d0 + 16 NV) += sum_t w[g][t] * v[t][same] for G heads at once: each value row
// is decoded in registers once and feeds G x NV accumulators; t in order per lane.
template <int G, int NV>
DENSA_TARGET_AVX512_BF16_INLINE void accumulate_rows_block(const float* w, const uint8_t* const* rows,
                                                           int num_rows, int head_dim, int d0, DType dtype,
                                                           float* acc) {
  __m512 a[G][NV];
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < NV; ++j) a[g][j] = _mm512_loadu_ps(acc + static_cast<int64_t>(g) * head_dim + d0 + 16 * j);
  for (int t = 0; t < num_rows; ++t) {
    __m512 v[NV];
    decode_lanes<NV>(rows[t], d0, dtype, v);
    for (int g = 0; g < G; ++g) {
      const __m512 wv = _mm512_set1_ps(w[g * kAttnTile + t]);
      for (int j = 0; j < NV; ++j) a[g][j] = _mm512_fmadd_ps(wv, v[j], a[g][j]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(acc + static_cast<int64_t>(g) * head_dim + d0 + 16 * j, a[g][j]);
}

// Lane blocks of 64 (G <= 4), 32 or 16 so that G x NV accumulators stay in registers.
template <int G>
DENSA_TARGET_AVX512_BF16_INLINE void accumulate_rows_g(const float* w, const uint8_t* const* rows, int num_rows,
                                                       int head_dim, DType dtype, float* acc) {
  int d0 = 0;
  if constexpr (G <= 4) {
    for (; d0 + 64 <= head_dim; d0 += 64) accumulate_rows_block<G, 4>(w, rows, num_rows, head_dim, d0, dtype, acc);
  }
  for (; d0 + 32 <= head_dim; d0 += 32) accumulate_rows_block<G, 2>(w, rows, num_rows, head_dim, d0, dtype, acc);
  if (d0 < head_dim) accumulate_rows_block<G, 1>(w, rows, num_rows, head_dim, d0, dtype, acc);
}

DENSA_TARGET_AVX512_BF16 void accumulate_rows_avx512(const float* w, int group, const uint8_t* const* rows,
                                                     int num_rows, int head_dim, DType dtype, float* acc) {
  for (int g0 = 0; g0 < group; g0 += 8) {
    const float* wg = w + g0 * kAttnTile;
    float* ag = acc + static_cast<int64_t>(g0) * head_dim;
    switch (std::min(8, group - g0)) {
      case 1: accumulate_rows_g<1>(wg, rows, num_rows, head_dim, dtype, ag); break;
      case 2: accumulate_rows_g<2>(wg, rows, num_rows, head_dim, dtype, ag); break;
      case 3: accumulate_rows_g<3>(wg, rows, num_rows, head_dim, dtype, ag); break;
      case 4: accumulate_rows_g<4>(wg, rows, num_rows, head_dim, dtype, ag); break;
      case 5: accumulate_rows_g<5>(wg, rows, num_rows, head_dim, dtype, ag); break;
      case 6: accumulate_rows_g<6>(wg, rows, num_rows, head_dim, dtype, ag); break;
      case 7: accumulate_rows_g<7>(wg, rows, num_rows, head_dim, dtype, ag); break;
      default: accumulate_rows_g<8>(wg, rows, num_rows, head_dim, dtype, ag); break;
    }
  }
}

// The prefill's decoded fp32 value tile runs the same kernel as the decode path's value rows:
// each row loaded once for up to 8 heads (one pass per head read every row G times and left
// 4 FMA chains at head_dim 64, a latency bound), every lane summed over t in order.
DENSA_TARGET_AVX512_BF16 void accumulate_avx512(const float* w, int group, const float* v, int num_rows,
                                                int head_dim, float* acc) {
  const uint8_t* rows[kAttnTile];
  for (int t = 0; t < num_rows; ++t) rows[t] = reinterpret_cast<const uint8_t*>(v + static_cast<int64_t>(t) * head_dim);
  accumulate_rows_avx512(w, group, rows, num_rows, head_dim, DType::kF32, acc);
}

}  // namespace

const AttnTileOps kAvx512Ops{decode_rows_avx512, scores_avx512,          softmax_update_avx512,
                             accumulate_avx512,  accumulate_rows_avx512, 256.0f};

}  // namespace densa::attention_internal
