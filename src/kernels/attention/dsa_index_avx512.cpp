// AVX-512 lightning-indexer scoring (see kernels/internal/dsa_index_isa.h for the arithmetic
// contract). Built for baseline x86-64 with a target attribute; only runs when the dispatcher
// has checked the CPU.
//
// One lane per stored position: a block of 16 positions has its FP8 keys decoded (exactly,
// through fp16) and transposed into kt[d][16], so every indexer head's dot product is one fma
// chain per lane in d order, 8 heads at a time against one load of kt[d]. The transpose costs
// 4 shuffles per 16 values against one fma per (head, value).
// The intrinsics headers read an undefined register on purpose (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/internal/dsa_index_isa.h"
#include "kernels/internal/target.h"

namespace densa::dsa_internal {
namespace {

constexpr int kLanes = 16;

// 16 e4m3 codes to their exact fp32 values. e4m3 bits s.eeee.mmm become the fp16 bits
// s.0eeee.mmm0000000: the same value scaled by 2^-8, for normal and subnormal codes alike
// (fp16 keeps subnormals), so a multiply by 2^8 restores it. S.1111.111 is e4m3's NaN.
DENSA_TARGET_AVX512_BW inline __m512 decode16(__m128i codes) {
  const __m256i w = _mm256_cvtepu8_epi16(codes);
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8);
  const __m256i mag = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)), 7);
  const __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_or_si256(sign, mag)), _mm512_set1_ps(256.0f));
  const __m128i low7 = _mm_set1_epi8(0x7f);
  const __mmask16 nan = _mm_cmpeq_epi8_mask(_mm_and_si128(codes, low7), low7);
  return _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(NAN));
}

// r[i] = row i in, column i out.
DENSA_TARGET_AVX512_BW inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
  }
}

// kNumHeads heads' relu'd, weighted scores added to total, in head order.
template <int kNumHeads>
DENSA_TARGET_AVX512_BW inline void heads(const float* q, const float* w, int dim, const float* kt, __m512 key_scale,
                                         __m512 scale, __m512& total) {
  __m512 acc[kNumHeads];
  for (int i = 0; i < kNumHeads; ++i) acc[i] = _mm512_setzero_ps();
  for (int d = 0; d < dim; ++d) {
    const __m512 k = _mm512_load_ps(kt + d * kLanes);
    for (int i = 0; i < kNumHeads; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i * dim + d]), k, acc[i]);
  }
  for (int i = 0; i < kNumHeads; ++i) {
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(acc[i], key_scale), scale);
    total = _mm512_fmadd_ps(_mm512_set1_ps(w[i]), _mm512_max_ps(v, _mm512_setzero_ps()), total);
  }
}

}  // namespace

DENSA_TARGET_AVX512_BW void score_range_avx512(const KvView& kv, int layer, const IndexQuery& query, int seq, int32_t first,
                                               int32_t last, float* out) {
  const KvLayout& L = kv.layout;
  const int D = L.index_dim;
  const int chunks = (D + kLanes - 1) / kLanes;
  std::vector<float, std::allocator<float>> storage(static_cast<size_t>(chunks) * kLanes * kLanes + kLanes);
  // 64-byte aligned view of the storage.
  float* kt = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t{63});
  const __m512 scale = _mm512_set1_ps(query.scale);
  for (int32_t p0 = first; p0 <= last; p0 += kLanes) {
    const int m = static_cast<int>(std::min<int32_t>(kLanes, last - p0 + 1));
    const uint8_t* codes[kLanes];
    alignas(64) float key_scales[kLanes] = {};
    for (int j = 0; j < m; ++j) {
      const int32_t p = p0 + j;
      const uint8_t* page = kv.page_ptr(kv.page_of(seq, p));
      const int slot = p % L.page_size;
      std::memcpy(&key_scales[j], page + L.index_scale_offset(layer, slot), 4);
      codes[j] = page + L.index_key_offset(layer, slot);
    }
    for (int c = 0; c < chunks; ++c) {
      const int width = std::min(kLanes, D - c * kLanes);
      const __mmask16 load_mask = static_cast<__mmask16>((1u << width) - 1u);
      __m512 r[kLanes];
      for (int j = 0; j < kLanes; ++j) {
        r[j] = j < m ? decode16(_mm_maskz_loadu_epi8(load_mask, codes[j] + c * kLanes)) : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int i = 0; i < kLanes; ++i) _mm512_store_ps(kt + (c * kLanes + i) * kLanes, r[i]);
    }
    const __m512 key_scale = _mm512_load_ps(key_scales);
    __m512 total = _mm512_setzero_ps();
    const int H = query.num_heads;
    int h = 0;
    for (; h + 8 <= H; h += 8) heads<8>(query.q + h * D, query.weights + h, D, kt, key_scale, scale, total);
    for (; h < H; ++h) heads<1>(query.q + h * D, query.weights + h, D, kt, key_scale, scale, total);
    _mm512_mask_storeu_ps(out + p0, static_cast<__mmask16>((1u << m) - 1u), total);
  }
}

}  // namespace densa::dsa_internal
