#pragma once
// The VNNI kernel and the AMX-INT8 GEMM of the INT8 and INT4 16-row tile layouts
// (quant_int8_tiles_avx512.cpp, quant_int4_tiles16_avx512.cpp). Both keep a group's 16 rows x 32 codes in VNNI order, the 16
// rows' scales of each 4 groups after their codes, and x as prepare_x_int8t writes it. Per
// 16-row tile, a chunk of groups at a time: the layout's Unpack writes the chunk's codes as
// signed int8 B tiles (512 bytes a group), then every block of 16 x rows runs
// amx_group_pipeline over them with tdpbssd and ends each group with tiles16_group_fma. The
// sums are the exact int32 sums of code x q the VNNI kernels compute, so both give the same bits.
#include <algorithm>

#include "kernels/internal/amx_group_pipeline.h"
#include "kernels/internal/matmul_quant_avx512_kernels.h"

namespace densa::matmul_internal {

inline constexpr int64_t kTiles16AmxChunkGroups = 32;  // groups unpacked per pass over the x rows

// Where a tile layout keeps its groups: chunks of 4 groups, chunk_bytes apart, the chunk's 4 x
// 16 scales at scales_at within it (group g's 32 bytes at scales_at + 32 (g % 4)).
struct Tiles16Groups {
  const uint8_t* tile;
  int64_t chunk_bytes;
  int64_t scales_at;
  const uint8_t* scales(int64_t g) const { return tile + g / 4 * chunk_bytes + scales_at + g % 4 * 32; }
};

// A chunk of one tile's groups against 16 x rows, for amx_group_pipeline.
template <bool kF16>
struct Tiles16AmxGroups {
  Tiles16Groups layout;
  const uint8_t* codes;  // the chunk's signed B tiles
  const uint8_t* x;      // the x block's q tiles from the chunk's first group (int8t_x_row)
  const float* xs;       // x_scale[t][g] = xs[t * step + g], g counted from the chunk's start
  int64_t g0, step;
  __m512 acc[16];

  const void* a(int64_t g) const { return x + g * 512; }
  const void* b(int64_t g) const { return codes + g * 512; }
  DENSA_TARGET_AVX512_QUANT_INLINE void epilogue(const int32_t* c, int64_t g) {
    const __m512 ws = tiles16_load_scales<kF16>(layout.scales(g0 + g));
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) acc[t] = tiles16_group_fma(acc[t], _mm512_load_si512(c + 16 * t), ws, xs[t * step + g]);
  }
};

// The VNNI kernel of both layouts, for T x rows from i0 against one 16-row tile (every n; the
// decode GEMV is T = 1 with kPrefetch): per group, eight vpdpbusd of the group's unsigned codes
// (lane = weight row) against x broadcast 4 bytes at a time, started from -(the layout's offset
// x sum(q)), then tiles16_group_fma. L provides kChunkBytes (4 groups and their scales),
// kPrefetchL1 / kPrefetchL2 (bytes ahead in the stream), codes(chunk, g, wv) (the eight operands
// of the chunk's group g), scales(chunk, g) (its 16 row scales, fp32) and kSumShift (the offset
// x sum(q) is the prepared 128 x sum(q) shifted right by it: 0 for code + 128, 4 for nibble + 8).
template <int T, bool kPrefetch, class L>
DENSA_TARGET_AVX512_QUANT_INLINE void tiles16_vnni(const Args& a, const uint8_t* tile, int64_t row0, int64_t i0) {
  const WeightView& w = *a.w;
  const int64_t chunks = w.cols / 128;
  const int32_t* xq[T];
  const float* xs[T];
  const int32_t* xc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const Int8tXRow row = int8t_x_row(a.xp, a.x_stride, w.cols, i0 + t);
    xq[t] = row.q;
    xs[t] = row.xs;
    xc[t] = row.xc;
  }
  __m512 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    const uint8_t* ch = tile + c * L::kChunkBytes;
    if constexpr (kPrefetch) {
      for (int64_t l = 0; l < L::kChunkBytes; l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ch + L::kPrefetchL1 + l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(ch + L::kPrefetchL2 + l), _MM_HINT_T1);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const int64_t gg = c * 4 + g;
      __m512i wv[8];
      L::codes(ch, g, wv);
      const __m512 ws = L::scales(ch, g);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int32_t* x4 = xq[t] + gg * 128;
        __m512i s0 = _mm512_set1_epi32(-(xc[t][gg] >> L::kSumShift)), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          s0 = _mm512_dpbusd_epi32(s0, wv[j], _mm512_set1_epi32(x4[j]));
          s1 = _mm512_dpbusd_epi32(s1, wv[j + 4], _mm512_set1_epi32(x4[j + 4]));
        }
        acc[t] = tiles16_group_fma(acc[t], _mm512_add_epi32(s0, s1), ws, xs[t][gg]);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(a.y + (i0 + t) * w.rows + row0, acc[t]);
}

// A last block of x rows at least this full runs on AMX with its padding rows (zeros, which
// prepare_x_int8t_pad writes) rather than on VNNI one to four rows at a time: AMX costs the same
// for a block whatever its rows, VNNI about a sixth of that per row.
inline constexpr int64_t kTiles16AmxMinTail = 8;

// x rows [0, n) against the 16-row tile whose first output row is row0, in blocks of 16: the last
// one may be partial (its padding rows zero), and only its n % 16 rows are written.
// unpack(g0, count, out) writes groups [g0, g0 + count) as signed B tiles. The caller configured
// the tiles (tiles16_amx_begin).
template <bool kF16, class Unpack>
DENSA_TARGET_AVX512_QUANT_AMX_INT8 __attribute__((always_inline)) inline void tiles16_amx(const Args& a, Tiles16Groups layout,
                                                                                      int64_t row0, int64_t n,
                                                                                      const Unpack& unpack) {
  const WeightView& w = *a.w;
  const int64_t groups = w.cols / 32, n16 = (n + 15) / 16 * 16, tail = n % 16;
  alignas(64) uint8_t codes[kTiles16AmxChunkGroups * 512];
  alignas(64) float tail_y[16 * 16];  // a partial last block's outputs, row stride 16
  for (int64_t g0 = 0; g0 < groups; g0 += kTiles16AmxChunkGroups) {
    const int64_t count = std::min(kTiles16AmxChunkGroups, groups - g0);  // groups % 4 == 0: even
    unpack(g0, count, codes);
    DENSA_MEMORY_BARRIER();  // the codes are stored before the tile loads read them
    // The next chunk's bytes (or the next tile's first) into L2, a share per x row block, so the
    // next unpack does not wait on memory (in one burst they stalled this pass). Past the
    // matrix's end it is a harmless prefetch.
    const uint8_t* next = layout.tile + (g0 + count) / 4 * layout.chunk_bytes;
    const int64_t next_bytes = count / 4 * layout.chunk_bytes;
    const int64_t share = (next_bytes / 64 + n16 / 16 - 1) / (n16 / 16) * 64;
    for (int64_t i0 = 0; i0 < n16; i0 += 16) {
      for (int64_t l = i0 / 16 * share; l < std::min(next_bytes, (i0 / 16 + 1) * share); l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + l), _MM_HINT_T1);
      }
      const Int8tXRow x = int8t_x_row(a.xp, a.x_stride, w.cols, i0);
      const bool partial = tail != 0 && i0 + 16 > n;
      float* y = partial ? tail_y : a.y + i0 * w.rows + row0;
      const int64_t y_stride = partial ? 16 : w.rows;
      Tiles16AmxGroups<kF16> gs{.layout = layout,
                                .codes = codes,
                                .x = reinterpret_cast<const uint8_t*>(x.q) + g0 * 512,
                                .xs = x.xs + g0,
                                .g0 = g0,
                                .step = groups,
                                .acc = {}};
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) gs.acc[t] = g0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(y + t * y_stride);
      kernels_internal::amx_group_pipeline<true>(count, 32, gs);
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) _mm512_storeu_ps(y + t * y_stride, gs.acc[t]);
    }
    DENSA_MEMORY_BARRIER();  // this chunk's tile loads come before the next chunk's codes
  }
  if (tail != 0) {
    for (int64_t t = 0; t < tail; ++t) std::memcpy(a.y + (n - tail + t) * w.rows + row0, tail_y + 16 * t, 64);
  }
}

// C tiles 0, 1: 16 x rows x 16 weight rows (int32); A tiles 2, 3: 16 x rows x 32 q (one
// contiguous 512-byte tile of the prepared block: rows 32 bytes apart); B tiles 4,
// 5: 8 x (16 weight rows x 4 codes). Loads it (ldtilecfg); tiles16_amx_end releases the tiles.
DENSA_TARGET_AVX512_QUANT_AMX_INT8 void tiles16_amx_begin();
DENSA_TARGET_AVX512_QUANT_AMX_INT8 void tiles16_amx_end();

}  // namespace densa::matmul_internal
