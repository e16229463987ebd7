// INT4 group-wise rows on AVX-512 (W4A8 by vpdpbusd; kernels/internal/
// matmul_quant_avx512_kernels.h), bf16 or f16 group scales.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/matmul_quant_avx512_kernels.h"

namespace densa::matmul_internal {
namespace {

// kF16: the group scales are f16 (GGUF Q4_0 repacked), else bf16.
template <int R, int NX, bool kF16>
DENSA_TARGET_AVX512_QUANT_INLINE void int4_tile(const Args& a, int64_t r0, int64_t i0) {
  const WeightView& w = *a.w;
  const int64_t cols = w.cols, g = w.scale_cols;
  const int64_t groups = cols / g;
  const uint8_t* rp[R];
  const uint16_t* sp[R];  // bf16 or f16 scales
  for (int r = 0; r < R; ++r) {
    rp[r] = w.row_ptr(r0 + r);
    sp[r] = (kF16 ? w.scales_f16 : w.scales_bf16) + (r0 + r) * groups;
  }
  const int64_t next_tile = R * w.row_bytes();  // the same spot in the next row tile
  const int64_t next_tile_scales = R * groups;
  // Lane l of a chunk covers elements 8l .. 8l+7: weight group (128 c + 8 l) / g. bf16: word
  // 2l + 1 of lane_group picks that group's scale (the lane's high half), word 2l is zeroed.
  // f16: word l of lane_group_f16 picks it, and vcvtph2ps widens the 16 words to fp32 (exact).
  const bool small_groups = g < kInt4Chunk;
  __m512i lane_group = _mm512_setzero_si512();
  __m256i lane_group_f16 = _mm256_setzero_si256();
  if (small_groups) {
    alignas(64) int16_t idx[32];
    for (int l = 0; l < 16; ++l) {
      idx[2 * l] = 0;
      idx[2 * l + 1] = static_cast<int16_t>(8 * l / g);
    }
    lane_group = _mm512_load_si512(idx);
    for (int l = 0; l < 16; ++l) idx[l] = static_cast<int16_t>(8 * l / g);
    lane_group_f16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
  }
  constexpr __mmask32 kHighWords = 0xaaaaaaaau;
  const __m512i nib = _mm512_set1_epi8(0x0f);
  __m512 acc[R][NX];
  zero_tile<R, NX>(acc);
  // Scale index of the chunk's first element, kept without a division in the loop:
  // g < 128 advances 128 / g groups per chunk, g >= 128 one group every g / 128 chunks.
  const int64_t groups_per_chunk = small_groups ? kInt4Chunk / g : 0;
  const int64_t chunks_per_group = small_groups ? 1 : g / kInt4Chunk;
  int64_t sidx = 0, chunk_in_group = 0;
  for (int64_t k = 0; k < cols; k += kInt4Chunk) {
    const bool tail = cols - k < kInt4Chunk;
    const __mmask64 m = tail ? byte_mask((cols - k) / 2) : ~__mmask64{0};
    // Scales this chunk covers (g < 128 only): exactly those are loaded, so the load never
    // reaches past the row's scales (they may end a mapped checkpoint file).
    const __mmask32 gm = static_cast<__mmask32>((1u << (tail ? (cols - k) / g : groups_per_chunk)) - 1u);
    const uint8_t* xs[NX];
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) xs[i] = a.xp + (i0 + i) * a.x_stride + k / kInt4Chunk * kInt4ChunkBytes;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      // Eight short row streams defeat the hardware prefetcher: ask for each row's data
      // kPrefetchBytes ahead (past a row's end that is the next row, read next anyway).
      // GEMV only: a GEMM reads the same row tile once per x tile, from cache.
      if constexpr (NX == 1) {
        _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k / 2 + kPrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k / 2 + next_tile), _MM_HINT_T1);
        if (small_groups) {  // g32 / g64: the scales are another 8 short streams (1/16 - 1/8 of the bytes)
          _mm_prefetch(reinterpret_cast<const char*>(sp[r] + sidx + kPrefetchBytes / 2), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(sp[r] + sidx + next_tile_scales), _MM_HINT_T1);
        }
      }
      const __m512i v = _mm512_maskz_loadu_epi8(m, rp[r] + k / 2);
      const __m512i lo = _mm512_and_si512(v, nib);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
      __m512 ws;
      if constexpr (kF16) {
        ws = small_groups ? _mm512_cvtph_ps(_mm256_permutexvar_epi16(lane_group_f16,
                                                                     _mm256_maskz_loadu_epi16(gm, sp[r] + sidx)))
                          : _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(sp[r][sidx])));
      } else {
        ws = small_groups
                 ? _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(kHighWords, lane_group,
                                                                      _mm512_maskz_loadu_epi16(gm, sp[r] + sidx)))
                 : _mm512_castsi512_ps(_mm512_maskz_set1_epi16(kHighWords, static_cast<short>(sp[r][sidx])));
      }
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        __m512i s = _mm512_loadu_si512(xs[i] + 192);
        s = _mm512_dpbusd_epi32(s, lo, _mm512_loadu_si512(xs[i]));
        s = _mm512_dpbusd_epi32(s, hi, _mm512_loadu_si512(xs[i] + 64));
        const __m512 scale = _mm512_mul_ps(ws, _mm512_loadu_ps(reinterpret_cast<const float*>(xs[i] + 128)));
        acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[r][i]);
      }
    }
    if (small_groups) {
      sidx += groups_per_chunk;
    } else if (++chunk_in_group == chunks_per_group) {
      chunk_in_group = 0;
      ++sidx;
    }
  }
  store_tile<R, NX>(a, r0, i0, acc);
}

template <bool kF16>
struct Int4Tile {
  template <int R, int NX>
  DENSA_TARGET_AVX512_QUANT_INLINE static void run(const Args& a, int64_t r0, int64_t i0) {
    int4_tile<R, NX, kF16>(a, r0, i0);
  }
};

}  // namespace

void int4_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  if (a.w->scales_f16 != nullptr) {
    if (n == 1) return row_tiles<Int4Tile<true>, 8, 1>(a, n, r_begin, r_end);
    return row_tiles<Int4Tile<true>, 4, 3>(a, n, r_begin, r_end);
  }
  if (n == 1) return row_tiles<Int4Tile<false>, 8, 1>(a, n, r_begin, r_end);
  return row_tiles<Int4Tile<false>, 4, 3>(a, n, r_begin, r_end);
}

}  // namespace densa::matmul_internal
