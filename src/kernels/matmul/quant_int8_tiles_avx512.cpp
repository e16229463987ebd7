// INT8 (GGUF Q8_0 repacked) in 16-row tiles (WeightLayout::kInt8Tiles16; kernels/internal/
// matmul_quant_avx512_kernels.h): exact group sums on VNNI, and on AMX-INT8 for blocks of 16 x
// rows, with the same bits.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/matmul_quant_avx512_kernels.h"

namespace densa::matmul_internal {
namespace {

// ---- INT8 (GGUF Q8_0) in 16-row tiles: exact sums per group, on VNNI or AMX, the same bits ----
// Per output (x row i, weight row r) and per 32-column group g in column order:
//   S = the exact int32 sum of code * q over the group,
//   acc = fma(float(S), w_scale[r][g] * x_scale[i][g], acc),   y = acc.
// |S| <= 32 * 128 * 127 < 2^24, so float(S) is exact; every fp32 operation is the same in both
// kernels, which is what lets a GEMM run on AMX and a GEMV on VNNI with identical results (and
// ref::matmul_int8_groups computes the same bits in scalar code). The weights are stored as
// code + 128 (unsigned, for vpdpbusd and tdpbsud); the sums start from -128 * sum(q) (exact).
//  - VNNI (int8t_vnni<T>): a group's 512 bytes are eight vectors of 16 rows x 4 columns; eight
//    vpdpbusd against x broadcast 4 bytes at a time give all 16 rows' S in one vector (lane =
//    row), shared by T x rows. The decode GEMV (T = 1) prefetches its stream.
//  - AMX (int8t_amx, 16 x rows at a time, where cpu_has_amx_int8()): C = tdpbsud(x tile 16 rows
//    x 32 columns, the group's 512 bytes as the B tile), stored and finished per x row by the
//    same vector steps; the next group's tile product is issued before this group's epilogue.
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

// The one fp32 step both INT8 tile kernels end a group with (so they give the same bits):
// acc += float(sum) * (w_scale * x_scale), the product rounded first, one fma.
DENSA_TARGET_AVX512_QUANT_INLINE __m512 int8t_group_fma(__m512 acc, __m512i sum, __m512 w_scales, float x_scale) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(w_scales, _mm512_set1_ps(x_scale)), acc);
}

DENSA_TARGET_AVX512_QUANT_INLINE __m512 int8t_load_scales(const uint8_t* scales) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
}

template <int T, bool kPrefetch>
DENSA_TARGET_AVX512_QUANT_INLINE void int8t_vnni(const Args& a, int64_t tile, int64_t i0) {
  const WeightView& w = *a.w;
  const int64_t chunks = w.cols / kInt8TileCols, groups = w.cols / 32;
  const uint8_t* base = int8t_tile(w, tile);
  const int32_t* xq[T];
  const float* xs[T];
  const int32_t* xc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const uint8_t* p = a.xp + (i0 + t) * a.x_stride;
    xq[t] = reinterpret_cast<const int32_t*>(p);
    xs[t] = reinterpret_cast<const float*>(p + w.cols);
    xc[t] = reinterpret_cast<const int32_t*>(p + w.cols + 4 * groups);
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
      const __m512 ws = int8t_load_scales(int8t_scales(base, gg));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int32_t* x4 = xq[t] + gg * 8;
        __m512i s0 = _mm512_set1_epi32(-xc[t][gg]), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          s0 = _mm512_dpbusd_epi32(s0, wv[j], _mm512_set1_epi32(x4[j]));
          s1 = _mm512_dpbusd_epi32(s1, wv[j + 4], _mm512_set1_epi32(x4[j + 4]));
        }
        acc[t] = int8t_group_fma(acc[t], _mm512_add_epi32(s0, s1), ws, xs[t][gg]);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(a.y + (i0 + t) * w.rows + tile * kInt8TileRows, acc[t]);
}

DENSA_TARGET_AVX512_QUANT_AMX_INT8 __attribute__((always_inline)) inline void int8t_amx_epilogue(const int32_t* cbuf, const uint8_t* scales,
                                                 const float* xs, const int32_t* xc,
                                                 int64_t xs_step, __m512 (&acc)[16]) {
  const __m512 ws = int8t_load_scales(scales);
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) {
    const __m512i sum = _mm512_sub_epi32(_mm512_load_si512(cbuf + 16 * t), _mm512_set1_epi32(xc[t * xs_step]));
    acc[t] = int8t_group_fma(acc[t], sum, ws, xs[t * xs_step]);
  }
}

// 16 x rows from i0 against one 16-row tile. Tiles: 0, 1 C; 2, 3 A (x); 4, 5 B (weights).
DENSA_TARGET_AVX512_QUANT_AMX_INT8 void int8t_amx(const Args& a, int64_t tile, int64_t i0) {
  const WeightView& w = *a.w;
  const int64_t groups = w.cols / 32;
  const uint8_t* base = int8t_tile(w, tile);
  const uint8_t* x = a.xp + i0 * a.x_stride;
  // x_scale[t][g] = xs[t * step + g], the same for the corrections (in 4-byte units).
  const auto* xs = reinterpret_cast<const float*>(x + w.cols);
  const auto* xc = reinterpret_cast<const int32_t*>(x + w.cols + 4 * groups);
  const int64_t step = a.x_stride / 4;
  const auto group_b = [&](int64_t g) { return int8t_codes(base, g); };
  const auto group_s = [&](int64_t g) { return int8t_scales(base, g); };
  alignas(64) int32_t cbuf[2][256];
  __m512 acc[16];
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
  _tile_loadd(2, x, a.x_stride);
  _tile_loadd(4, group_b(0), 64);
  _tile_zero(0);
  _tile_dpbsud(0, 2, 4);
  _tile_stored(0, cbuf[0], 64);
  for (int64_t g = 0; g < groups; g += 2) {  // groups is a multiple of 4
    _tile_loadd(3, x + (g + 1) * 32, a.x_stride);
    _tile_loadd(5, group_b(g + 1), 64);
    _tile_zero(1);
    _tile_dpbsud(1, 3, 5);
    DENSA_MEMORY_BARRIER();
    int8t_amx_epilogue(cbuf[0], group_s(g), xs + g, xc + g, step, acc);
    _tile_stored(1, cbuf[1], 64);
    if (g + 2 < groups) {
      _tile_loadd(2, x + (g + 2) * 32, a.x_stride);
      _tile_loadd(4, group_b(g + 2), 64);
      _tile_zero(0);
      _tile_dpbsud(0, 2, 4);
    }
    DENSA_MEMORY_BARRIER();
    int8t_amx_epilogue(cbuf[1], group_s(g + 1), xs + g + 1, xc + g + 1, step, acc);
    if (g + 2 < groups) _tile_stored(0, cbuf[0], 64);
    DENSA_MEMORY_BARRIER();
  }
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) _mm512_storeu_ps(a.y + (i0 + t) * w.rows + tile * kInt8TileRows, acc[t]);
}

// C tiles 0, 1: 16 x rows x 16 weight rows (int32); A tiles 2, 3: 16 x rows x 32 codes; B tiles
// 4, 5: 8 x (16 weight rows x 4 codes). Static: GCC 12 drops the stores of a local
// configuration before ldtilecfg (seen: only the palette byte was written).
const kernels_internal::AmxTileConfig& int8t_config() {
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
  return cfg;
}

DENSA_TARGET_AVX512_QUANT_AMX_INT8 void int8t_amx_begin() { _tile_loadconfig(&int8t_config()); }

DENSA_TARGET_AVX512_QUANT_AMX_INT8 void int8t_amx_end() { _tile_release(); }

}  // namespace

DENSA_TARGET_AVX512_QUANT void int8_tiles_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  CHECK(r_begin % kInt8TileRows == 0 && r_end % kInt8TileRows == 0) << "int8 tiles: rows " << r_begin << ".." << r_end;
  const bool amx = n >= 16 && matmul_quant_int8_amx_usable(a.w->amx);
  if (amx) int8t_amx_begin();
  for (int64_t tile = r_begin / kInt8TileRows; tile < r_end / kInt8TileRows; ++tile) {
    int64_t i = 0;
    if (n == 1) {
      int8t_vnni<1, true>(a, tile, 0);
      continue;
    }
    if (amx) {
      for (; i + 16 <= n; i += 16) int8t_amx(a, tile, i);
    }
    for (; i + 4 <= n; i += 4) int8t_vnni<4, false>(a, tile, i);
    for (; i < n; ++i) int8t_vnni<1, false>(a, tile, i);
  }
  if (amx) int8t_amx_end();
}

}  // namespace densa::matmul_internal
