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
//  - VNNI (tiles16_vnni): a group's 512 bytes are eight vectors of 16 rows x 4 columns; eight
//    vpdpbusd against x broadcast 4 bytes at a time give all 16 rows' S in one vector (lane =
//    row), shared by T x rows. The decode GEMV (T = 1) prefetches its stream.
//  - AMX (tiles16_amx, 16 x rows at a time, where cpu_has_amx_int8(); kernels/internal/
//    tiles16_amx.h): the codes made signed once per chunk of groups, C = tdpbssd(x tile 16 rows
//    x 32 columns, the group's signed codes as the B tile) = S, finished per x row by the same
//    vector step.
constexpr int64_t kInt8TilePrefetchL1 = 1 * kInt8TileChunkBytes;  // bytes ahead in the stream
constexpr int64_t kInt8TilePrefetchL2 = 4 * kInt8TileChunkBytes;

// The INT8 tiles as a tiles16_amx.h layout: a group's 512 bytes are the eight VNNI operands as
// stored (code + 128), f16 scales.
struct Int8tLayout {
  static constexpr int64_t kChunkBytes = kInt8TileChunkBytes;
  static constexpr int64_t kPrefetchL1 = kInt8TilePrefetchL1, kPrefetchL2 = kInt8TilePrefetchL2;
  static constexpr int kSumShift = 0;
  static const uint8_t* tile(const WeightView& w, int64_t t) {
    return static_cast<const uint8_t*>(w.data) + t * (w.cols / kInt8TileCols) * kInt8TileChunkBytes;
  }
  DENSA_TARGET_AVX512_QUANT_INLINE static void codes(const uint8_t* chunk, int g, __m512i (&wv)[8]) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) wv[j] = _mm512_load_si512(chunk + g * kInt8TileGroupBytes + 64 * j);
  }
  // Vectors m and m + 4 of codes() alone.
  DENSA_TARGET_AVX512_QUANT_INLINE static void codes_pair(const uint8_t* chunk, int g, int m, __m512i& lo, __m512i& hi) {
    lo = _mm512_load_si512(chunk + g * kInt8TileGroupBytes + 64 * m);
    hi = _mm512_load_si512(chunk + g * kInt8TileGroupBytes + 64 * (m + 4));
  }
  DENSA_TARGET_AVX512_QUANT_INLINE static __m512 scales(const uint8_t* chunk, int g) {
    return tiles16_load_scales<true>(chunk + 4 * kInt8TileGroupBytes + 32 * g);
  }
  // code + 128 back to code (a flip of the top bit): the same products as tdpbsud on the stored
  // bytes less 128 * sum(q), with no correction left for the epilogue.
  DENSA_TARGET_AVX512_QUANT_INLINE static void signed_codes(const uint8_t* tile, int64_t g0, int64_t count,
                                                            uint8_t* out) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int64_t g = 0; g < count; ++g) {
      const int64_t gg = g0 + g;
      const uint8_t* b = tile + gg / 4 * kInt8TileChunkBytes + gg % 4 * kInt8TileGroupBytes;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        _mm512_store_si512(out + g * 512 + 64 * j, _mm512_xor_si512(_mm512_load_si512(b + 64 * j), flip));
      }
    }
  }
};

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
  tiles16_rows<Int8tLayout>(a, n, r_begin, r_end);
}

}  // namespace densa::matmul_internal
