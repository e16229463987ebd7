#pragma once
// The kernels of the INT8 and INT4 16-row tile layouts (quant_int8_tiles_avx512.cpp,
// quant_int4_tiles16_avx512.cpp): the VNNI kernel, the AMX-INT8 GEMM and the row loop that picks
// between them. Both layouts keep a group's 16 rows x 32 codes in VNNI order and the 16 rows'
// scales of each 4 groups after their codes, and both read x as prepare_x_int8t writes it. A
// layout is a traits class L:
//   kChunkBytes             one chunk: 4 groups' codes and their scales;
//   kPrefetchL1 / L2        bytes ahead the decode GEMV prefetches its stream;
//   kSumShift               the VNNI sums start from -(prepared 128 x sum(q)) >> kSumShift (0 for
//                           codes stored + 128, 4 for nibbles stored + 8);
//   tile(w, t)              where 16-row tile t starts;
//   codes(chunk, g, wv)     the chunk's group g as the eight unsigned vpdpbusd operands;
//   codes_pair(chunk, g, m, lo, hi)  operands m and m + 4 of them alone;
//   scales(chunk, g)        its 16 row scales as fp32;
//   signed_codes(tile, g0, count, out)  groups [g0, g0 + count) as signed B tiles, 512 bytes each.
// The AMX GEMM makes a chunk of groups signed once, then every block of 16 x rows runs
// amx_group_pipeline over them with tdpbssd and ends each group with tiles16_group_fma. The sums
// are the exact int32 sums the VNNI kernel computes, so both give the same bits.
#include <algorithm>

#include "kernels/internal/amx_group_pipeline.h"
#include "kernels/internal/matmul_quant_avx512_kernels.h"

namespace densa::matmul_internal {

inline constexpr int64_t kTiles16AmxChunkGroups = 32;  // groups unpacked per pass over the x rows

// A chunk of one tile's groups against 16 x rows, for amx_group_pipeline.
template <class L>
struct Tiles16AmxGroups {
  const uint8_t* tile;
  const uint8_t* codes;  // the chunk's signed B tiles
  const uint8_t* x;      // the x block's q tiles from the chunk's first group (int8t_x_row)
  const float* xs;       // x_scale[t][g] = xs[t * step + g], g counted from the chunk's start
  int64_t g0, step;
  __m512 acc[16];

  const void* a(int64_t g) const { return x + g * 512; }
  const void* b(int64_t g) const { return codes + g * 512; }
  DENSA_TARGET_AVX512_QUANT_INLINE void epilogue(const int32_t* c, int64_t g) {
    const int64_t gg = g0 + g;
    const __m512 ws = L::scales(tile + gg / 4 * L::kChunkBytes, static_cast<int>(gg % 4));
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) acc[t] = tiles16_group_fma(acc[t], _mm512_load_si512(c + 16 * t), ws, xs[t * step + g]);
  }
};

// x rows per block of the VNNI GEMM (tiles16_vnni): 6 and 8 were measured slower (spilled
// row pointers, longer dependency chains per group).
inline constexpr int kTiles16VnniRows = 4;

// One vpdpbusd with its signed operand, 4 bytes at p, broadcast from memory ({1to16}): the
// intrinsic with _mm512_set1_epi32(*p) compiles to a separate broadcast load, and the GEMM's
// loop is bound by the instructions it issues.
DENSA_TARGET_AVX512_QUANT_INLINE __m512i dpbusd_bcast(__m512i acc, __m512i u, const int32_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*p));
  return acc;
}

// One 32-bit value broadcast to every lane straight from memory, into a register two vpdpbusd
// share (one load for both).
DENSA_TARGET_AVX512_QUANT_INLINE __m512i broadcast_from_memory(const int32_t* p) {
  __m512i r;
  asm("vpbroadcastd %1, %0" : "=v"(r) : "m"(*p));
  return r;
}

// The VNNI kernel, for T x rows from i0 against the NT 16-row tiles from `t16` (every n; the
// decode GEMV is T = 1, NT = 1 with kPrefetch, a GEMM's rows come in blocks of kTiles16VnniRows
// and one last block of fewer, its tiles in pairs): per group, eight vpdpbusd per tile of the
// group's unsigned codes (lane = weight row) against x broadcast 4 bytes at a time, started from
// -(the layout's offset x sum(q)) (one tile: two chains of four; two tiles: one chain of eight
// per row and tile), then tiles16_group_fma. Each group's
// weights are unpacked once for the T rows; the sum starts of a chunk's 4 groups are computed
// for a row at once. One tile takes x broadcast from memory inside each vpdpbusd; two tiles
// share each broadcast register. The loop is bound by its loads (on EPYC-Z5 about two a cycle,
// a broadcast counting as one), and two tiles issue 0.5 x loads per vpdpbusd instead of 1; a
// product's int32 sums are exact and its fp32 steps per group the same, so both give the same
// bits.
template <int T, int NT, bool kPrefetch, class L>
DENSA_TARGET_AVX512_QUANT_INLINE void tiles16_vnni(const Args& a, int64_t t16, int64_t i0) {
  static_assert(T <= 8 && (NT == 1 || NT == 2));
  const WeightView& w = *a.w;
  const uint8_t* tile[NT];
#pragma GCC unroll 2
  for (int k = 0; k < NT; ++k) tile[k] = L::tile(w, t16 + k);
  const int64_t chunks = w.cols / 128;
  const int32_t* xq[T];
  const float* xs[T];
  const int32_t* xc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const Int8tXRow row = int8t_x_row(a.xp, a.x_stride, w.cols, i0 + t);
    xq[t] = row.q;
    xs[t] = row.xs;
    xc[t] = row.xc;
  }
  __m512 acc[T][NT];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int k = 0; k < NT; ++k) acc[t][k] = _mm512_setzero_ps();
  alignas(64) int32_t start[T][4];  // the chunk's sum starts, row t group g at start[t][g]
  for (int64_t c = 0; c < chunks; ++c) {
    if constexpr (kPrefetch) {
      const uint8_t* ch = tile[0] + c * L::kChunkBytes;
      for (int64_t l = 0; l < L::kChunkBytes; l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ch + L::kPrefetchL1 + l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(ch + L::kPrefetchL2 + l), _MM_HINT_T1);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xc[t] + 4 * c));
      _mm_store_si128(reinterpret_cast<__m128i*>(start[t]), _mm_sub_epi32(_mm_setzero_si128(), _mm_srai_epi32(v, L::kSumShift)));
    }
    if constexpr (NT == 1) {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const int64_t gg = c * 4 + g;
        __m512i wv[8];
        L::codes(tile[0] + c * L::kChunkBytes, g, wv);
        const __m512 ws = L::scales(tile[0] + c * L::kChunkBytes, g);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int32_t* x4 = xq[t] + gg * 128;
          __m512i s0 = _mm512_set1_epi32(start[t][g]), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) {
            s0 = dpbusd_bcast(s0, wv[j], x4 + j);
            s1 = dpbusd_bcast(s1, wv[j + 4], x4 + j + 4);
          }
          acc[t][0] = tiles16_group_fma(acc[t][0], _mm512_add_epi32(s0, s1), ws, xs[t][gg]);
        }
      }
    } else {
      // The pair's four groups as a loop, not one unrolled body: a quarter of the instructions
      // for the front end, measured faster in prefill (docs/performance/kernels.md). The
      // one-tile kernel (the decode GEMV's) stays unrolled: rolled, decode gained nothing clear.
#pragma GCC unroll 1
      for (int g = 0; g < 4; ++g) {
        const int64_t gg = c * 4 + g;
        // One chain per (row, tile), fed code vector by code vector: two tiles' vectors m and
        // m + 4 live at a time instead of both tiles' whole groups.
        __m512i sum[T][2];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) sum[t][0] = sum[t][1] = _mm512_set1_epi32(start[t][g]);
#pragma GCC unroll 4
        for (int m = 0; m < 4; ++m) {
          __m512i lo[2], hi[2];
#pragma GCC unroll 2
          for (int k = 0; k < 2; ++k) L::codes_pair(tile[k] + c * L::kChunkBytes, g, m, lo[k], hi[k]);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const int32_t* x4 = xq[t] + gg * 128;
            const __m512i b0 = broadcast_from_memory(x4 + m), b1 = broadcast_from_memory(x4 + m + 4);
#pragma GCC unroll 2
            for (int k = 0; k < 2; ++k) sum[t][k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum[t][k], lo[k], b0), hi[k], b1);
          }
        }
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k) {
          const __m512 ws = L::scales(tile[k] + c * L::kChunkBytes, g);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) acc[t][k] = tiles16_group_fma(acc[t][k], sum[t][k], ws, xs[t][gg]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int k = 0; k < NT; ++k) _mm512_storeu_ps(a.y + (i0 + t) * w.rows + (t16 + k) * 16, acc[t][k]);
}

// A last block of x rows at least this full runs on AMX with its padding rows (zeros, which
// prepare_x_int8t_pad writes) rather than on VNNI one to four rows at a time: AMX costs the same
// for a block whatever its rows, VNNI grows with every row, and from about half a block on the
// AMX pass is the cheaper (docs/performance/kernels.md measures both paths).
inline constexpr int64_t kTiles16AmxMinTail = 8;

// x rows [0, n) against 16-row tile `t16`, in blocks of 16: the last one may be partial (its
// padding rows zero), and only its n % 16 rows are written. The caller configured the tiles
// (tiles16_amx_begin).
template <class L>
DENSA_TARGET_AVX512_QUANT_AMX_INT8 void tiles16_amx(const Args& a, int64_t t16, int64_t n) {
  const WeightView& w = *a.w;
  const uint8_t* tile = L::tile(w, t16);
  const int64_t row0 = t16 * 16;
  const int64_t groups = w.cols / 32, n16 = (n + 15) / 16 * 16, tail = n % 16;
  alignas(64) uint8_t codes[kTiles16AmxChunkGroups * 512];
  alignas(64) float tail_y[16 * 16];  // a partial last block's outputs, row stride 16
  for (int64_t g0 = 0; g0 < groups; g0 += kTiles16AmxChunkGroups) {
    const int64_t count = std::min(kTiles16AmxChunkGroups, groups - g0);  // groups % 4 == 0: even
    L::signed_codes(tile, g0, count, codes);
    DENSA_MEMORY_BARRIER();  // the codes are stored before the tile loads read them
    // The next chunk's bytes (or the next tile's first) into L2, a share per x row block, so the
    // next unpack does not wait on memory (in one burst they stalled this pass). Past the
    // matrix's end it is a harmless prefetch.
    const uint8_t* next = tile + (g0 + count) / 4 * L::kChunkBytes;
    const int64_t next_bytes = count / 4 * L::kChunkBytes;
    const int64_t share = (next_bytes / 64 + n16 / 16 - 1) / (n16 / 16) * 64;
    for (int64_t i0 = 0; i0 < n16; i0 += 16) {
      for (int64_t l = i0 / 16 * share; l < std::min(next_bytes, (i0 / 16 + 1) * share); l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + l), _MM_HINT_T1);
      }
      const Int8tXRow x = int8t_x_row(a.xp, a.x_stride, w.cols, i0);
      const bool partial = tail != 0 && i0 + 16 > n;
      float* y = partial ? tail_y : a.y + i0 * w.rows + row0;
      const int64_t y_stride = partial ? 16 : w.rows;
      Tiles16AmxGroups<L> gs{.tile = tile,
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

// x rows [i, n) against the NT tiles from t16 on VNNI: blocks of kTiles16VnniRows, then the last
// 1-3 rows (an MoE expert's routed tokens rarely come in fours). The next_tiles tiles after them
// (the thread's next pair) are fetched into L2 meanwhile, a share before each block: a pair's
// first block otherwise waits on DRAM for all its weights, since the stream prefetcher starts
// afresh at each pair (measured in docs/performance/kernels.md).
template <int NT, class L>
DENSA_TARGET_AVX512_QUANT_INLINE void tiles16_vnni_rows(const Args& a, int64_t t16, int64_t i, int64_t n, int64_t next_tiles) {
  const uint8_t* next = next_tiles > 0 ? L::tile(*a.w, t16 + NT) : nullptr;
  const int64_t next_bytes = next_tiles * (a.w->cols / 128) * L::kChunkBytes;
  const int64_t blocks = std::max<int64_t>(1, (n - i) / kTiles16VnniRows);
  const int64_t share = (next_bytes / 64 + blocks - 1) / blocks * 64;
  int64_t ahead = 0;
  for (; i + kTiles16VnniRows <= n; i += kTiles16VnniRows) {
    for (const int64_t end = std::min(next_bytes, ahead + share); ahead < end; ahead += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(next + ahead), _MM_HINT_T1);
    }
    tiles16_vnni<kTiles16VnniRows, NT, false, L>(a, t16, i);
  }
  static_assert(kTiles16VnniRows == 4);
  switch (n - i) {
    case 3: tiles16_vnni<3, NT, false, L>(a, t16, i); break;
    case 2: tiles16_vnni<2, NT, false, L>(a, t16, i); break;
    case 1: tiles16_vnni<1, NT, false, L>(a, t16, i); break;
    default: break;
  }
}

// C tiles 0, 1: 16 x rows x 16 weight rows (int32); A tiles 2, 3: 16 x rows x 32 q (one
// contiguous 512-byte tile of the prepared block: rows 32 bytes apart); B tiles 4,
// 5: 8 x (16 weight rows x 4 codes). Loads it (ldtilecfg); tiles16_amx_end releases the tiles.
DENSA_TARGET_AVX512_QUANT_AMX_INT8 void tiles16_amx_begin();
DENSA_TARGET_AVX512_QUANT_AMX_INT8 void tiles16_amx_end();

// Outputs of weight rows [r_begin, r_end) (whole 16-row tiles) for the n x rows of a.xp: the
// decode GEMV on VNNI with its prefetch; GEMMs on AMX-INT8 where the weight may use it, for whole
// blocks of 16 x rows and a last block of at least kTiles16AmxMinTail, the rest on VNNI in
// blocks of kTiles16VnniRows and one last block of fewer.
template <class L>
DENSA_TARGET_AVX512_QUANT void tiles16_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  CHECK(r_begin % 16 == 0 && r_end % 16 == 0) << "16-row tiles: rows " << r_begin << ".." << r_end;
  const bool amx = n >= kTiles16AmxMinTail && matmul_quant_int8_amx_usable(a.w->amx);
  const int64_t n_amx = !amx ? 0 : n % 16 >= kTiles16AmxMinTail ? n : n / 16 * 16;
  if (n == 1) {
    for (int64_t t16 = r_begin / 16; t16 < r_end / 16; ++t16) tiles16_vnni<1, 1, true, L>(a, t16, 0);
    return;
  }
  if (amx) {
    tiles16_amx_begin();
    for (int64_t t16 = r_begin / 16; t16 < r_end / 16; ++t16) tiles16_amx<L>(a, t16, n_amx);
    tiles16_amx_end();
  }
  // The rows AMX left, on VNNI: tiles in pairs (a last odd one alone). After an AMX pass the
  // weights were just read, so only a VNNI-only GEMM fetches the next pair ahead.
  for (int64_t t16 = r_begin / 16; t16 < r_end / 16; t16 += 2) {
    const int64_t next_tiles = n_amx > 0 ? 0 : std::clamp<int64_t>(r_end / 16 - (t16 + 2), 0, 2);
    if (t16 + 1 < r_end / 16) {
      tiles16_vnni_rows<2, L>(a, t16, n_amx, n, next_tiles);
    } else {
      tiles16_vnni_rows<1, L>(a, t16, n_amx, n, 0);
    }
  }
}

}  // namespace densa::matmul_internal
