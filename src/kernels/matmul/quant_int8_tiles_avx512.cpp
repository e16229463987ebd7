// INT8 (GGUF Q8_0 repacked) in 16-row tiles (WeightLayout::kInt8Tiles16; kernels/internal/
// matmul_quant_avx512_kernels.h): exact group sums on VNNI, and on AMX-INT8 for blocks of 16 x
// rows, with the same bits.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/tiles16_amx.h"

namespace densa::matmul_internal {
namespace {

// ---- INT8 (GGUF Q8_0) in 16-row tiles: exact sums per group, on VNNI or AMX, the same bits ----
// Per output (x row i, weight row r) and per 32-column group g in column order:
//   S = the exact int32 sum of code * q over the group,
//   acc = fma(float(S), w_scale[r][g] * x_scale[i][g], acc),   y = acc.
// |S| <= 32 * 128 * 127 < 2^24, so float(S) is exact; every fp32 operation is the same in both
// kernels, which is what lets a GEMM run on AMX and a GEMV on VNNI with identical results (and
// ref::matmul_int8_groups computes the same bits in scalar code). The weights are stored as
// code + 128 (unsigned, for vpdpbusd); the VNNI sums start from -128 * sum(q) (exact).
//  - VNNI (int8t_vnni<T>): a group's 512 bytes are eight vectors of 16 rows x 4 columns; eight
//    vpdpbusd against x broadcast 4 bytes at a time give all 16 rows' S in one vector (lane =
//    row), shared by T x rows. The decode GEMV (T = 1) prefetches its stream.
//  - AMX (int8t_amx, 16 x rows at a time, where cpu_has_amx_int8(); kernels/internal/
//    tiles16_amx.h): the codes made signed once per chunk of groups, C = tdpbssd(x tile 16 rows
//    x 32 columns, the group's signed codes as the B tile) = S, finished per x row by the same
//    vector step.
constexpr int64_t kInt8TilePrefetchL1 = 1 * kInt8TileChunkBytes;  // bytes ahead in the stream
constexpr int64_t kInt8TilePrefetchL2 = 4 * kInt8TileChunkBytes;

// Where 16-row tile `tile` starts, and within it group g's 512 code bytes and 16 f16 scales.
const uint8_t* int8t_tile(const WeightView& w, int64_t tile) {
  return static_cast<const uint8_t*>(w.data) + tile * (w.cols / kInt8TileCols) * kInt8TileChunkBytes;
}
const uint8_t* int8t_codes(const uint8_t* tile, int64_t g) {
  return tile + g / 4 * kInt8TileChunkBytes + g % 4 * kInt8TileGroupBytes;
}
const uint8_t* int8t_scales(const uint8_t* tile, int64_t g) {
  return tile + g / 4 * kInt8TileChunkBytes + 4 * kInt8TileGroupBytes + g % 4 * 32;
}

template <int T, bool kPrefetch>
DENSA_TARGET_AVX512_QUANT_INLINE void int8t_vnni(const Args& a, int64_t tile, int64_t i0) {
  const WeightView& w = *a.w;
  const int64_t chunks = w.cols / kInt8TileCols;
  const uint8_t* base = int8t_tile(w, tile);
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
    const uint8_t* ch = base + c * kInt8TileChunkBytes;
    if constexpr (kPrefetch) {
      for (int64_t l = 0; l < kInt8TileChunkBytes; l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ch + kInt8TilePrefetchL1 + l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(ch + kInt8TilePrefetchL2 + l), _MM_HINT_T1);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const int64_t gg = c * 4 + g;
      const uint8_t* b = int8t_codes(base, gg);
      __m512i wv[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) wv[j] = _mm512_load_si512(b + 64 * j);
      const __m512 ws = tiles16_load_scales<true>(int8t_scales(base, gg));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int32_t* x4 = xq[t] + gg * 128;
        __m512i s0 = _mm512_set1_epi32(-xc[t][gg]), s1 = _mm512_setzero_si512();
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
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(a.y + (i0 + t) * w.rows + tile * kInt8TileRows, acc[t]);
}

// Groups [g0, g0 + count) of a tile's codes as signed int8 (code + 128 back to code), 512 bytes
// a group, for tdpbssd: the same products as tdpbsud on the stored bytes less 128 * sum(q), with
// no correction left for the epilogue.
struct Int8tSignedCodes {
  const uint8_t* base;
  DENSA_TARGET_AVX512_QUANT_INLINE void operator()(int64_t g0, int64_t count, uint8_t* out) const {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int64_t g = 0; g < count; ++g) {
      const uint8_t* b = int8t_codes(base, g0 + g);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        _mm512_store_si512(out + g * 512 + 64 * j, _mm512_xor_si512(_mm512_load_si512(b + 64 * j), flip));
      }
    }
  }
};

DENSA_TARGET_AVX512_QUANT_AMX_INT8 void int8t_amx(const Args& a, int64_t tile, int64_t n) {
  const uint8_t* base = int8t_tile(*a.w, tile);
  tiles16_amx<true>(a, Tiles16Groups{base, kInt8TileChunkBytes, 4 * kInt8TileGroupBytes}, tile * kInt8TileRows, n,
                    Int8tSignedCodes{base});
}

}  // namespace

DENSA_TARGET_AVX512_QUANT_AMX_INT8 void tiles16_amx_begin() {
  // Static: GCC 12 drops the stores of a local configuration before ldtilecfg (seen: only the
  // palette byte was written).
  static const kernels_internal::AmxTileConfig cfg = [] {
    kernels_internal::AmxTileConfig c;
    c.set(0, 16, 64);
    c.set(1, 16, 64);
    c.set(2, 16, 32);
    c.set(3, 16, 32);
    c.set(4, 8, 64);
    c.set(5, 8, 64);
    return c;
  }();
  _tile_loadconfig(&cfg);
}

DENSA_TARGET_AVX512_QUANT_AMX_INT8 void tiles16_amx_end() { _tile_release(); }

DENSA_TARGET_AVX512_QUANT void int8_tiles_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  CHECK(r_begin % kInt8TileRows == 0 && r_end % kInt8TileRows == 0) << "int8 tiles: rows " << r_begin << ".." << r_end;
  const bool amx = n >= kTiles16AmxMinTail && matmul_quant_int8_amx_usable(a.w->amx);
  const int64_t n_amx = !amx ? 0 : n % 16 >= kTiles16AmxMinTail ? n : n / 16 * 16;
  if (amx) tiles16_amx_begin();
  for (int64_t tile = r_begin / kInt8TileRows; tile < r_end / kInt8TileRows; ++tile) {
    int64_t i = 0;
    if (n == 1) {
      int8t_vnni<1, true>(a, tile, 0);
      continue;
    }
    if (amx) {
      i = n_amx;
      int8t_amx(a, tile, n_amx);
    }
    for (; i + 4 <= n; i += 4) int8t_vnni<4, false>(a, tile, i);
    for (; i < n; ++i) int8t_vnni<1, false>(a, tile, i);
  }
  if (amx) tiles16_amx_end();
}

}  // namespace densa::matmul_internal
