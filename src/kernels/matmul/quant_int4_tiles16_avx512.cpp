// INT4 g32 (GGUF Q4_0 and compressed-tensors checkpoints) in 16-row tiles
// (WeightLayout::kInt4Tiles16, quant/int4_group.h): the INT8 16-row tiles' arithmetic at 4 bits,
// exact group sums on VNNI for every n and on AMX-INT8 for blocks of 16 x rows, the same bits.
// Per output (x row i, weight row r) and per 32-column group g in column order:
//   S = the exact int32 sum of (nibble - 8) * q over the group,
//   acc = fma(float(S), w_scale[r][g] * x_scale[i][g], acc),   y = acc
// (ref::matmul_int8_groups_fp32). x is prepared as for the INT8 tiles (prepare_x_int8t), whose
// per-group term is 128 * sum(q); 8 * sum(q) is that over 16, exactly.
//  - VNNI (tiles16_vnni): a group's 256 bytes are four vectors; their low nibbles are the
//    group's first 16 columns as four vpdpbusd operands of 16 rows x 4 columns (lane = row),
//    their high nibbles the last 16, so eight vpdpbusd against x broadcast 4 bytes at a time
//    give the 16 rows' sums of nibble * q, started from -8 * sum(q). The decode GEMV (T = 1)
//    prefetches its one stream.
//  - AMX (kernels/internal/tiles16_amx.h): the nibbles less 8 as signed B tiles, once per chunk
//    for every block of x rows, and tdpbssd.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/tiles16_amx.h"

namespace densa::matmul_internal {
namespace {

constexpr int64_t kInt4PrefetchL1 = 1 * kInt4Tile16ChunkBytes;  // bytes ahead in the decode stream
constexpr int64_t kInt4PrefetchL2 = 4 * kInt4Tile16ChunkBytes;

// Group g's codes (256 bytes) as the eight unsigned VNNI operands: wv[m] the low nibbles of
// vector m (columns 4 m .. 4 m + 3), wv[m + 4] the high ones (columns 16 + 4 m ..).
DENSA_TARGET_AVX512_QUANT_INLINE void group_nibbles(const uint8_t* b, __m512i (&wv)[8]) {
  const __m512i low = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512i p = _mm512_load_si512(b + 64 * m);
    wv[m] = _mm512_and_si512(p, low);
    wv[m + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), low);
  }
}

// The INT4 tiles as a tiles16_amx.h layout: a group's 256 bytes unpacked by group_nibbles, f16 or
// bf16 scales.
template <bool kF16>
struct Int4t16Layout {
  static constexpr int64_t kChunkBytes = kInt4Tile16ChunkBytes;
  static constexpr int64_t kPrefetchL1 = kInt4PrefetchL1, kPrefetchL2 = kInt4PrefetchL2;
  static constexpr int kSumShift = 4;  // 8 * sum(q) = (128 * sum(q)) / 16, exact
  static const uint8_t* tile(const WeightView& w, int64_t t) {
    return static_cast<const uint8_t*>(w.data) + t * (w.cols / kInt4Tile16Cols) * kInt4Tile16ChunkBytes;
  }
  DENSA_TARGET_AVX512_QUANT_INLINE static void codes(const uint8_t* chunk, int g, __m512i (&wv)[8]) {
    group_nibbles(chunk + g * kInt4Tile16GroupBytes, wv);
  }
  // Vectors m and m + 4 of codes() alone: one 64-byte load's low and high nibbles.
  DENSA_TARGET_AVX512_QUANT_INLINE static void codes_pair(const uint8_t* chunk, int g, int m, __m512i& lo, __m512i& hi) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    const __m512i p = _mm512_load_si512(chunk + g * kInt4Tile16GroupBytes + 64 * m);
    lo = _mm512_and_si512(p, low);
    hi = _mm512_and_si512(_mm512_srli_epi16(p, 4), low);
  }
  DENSA_TARGET_AVX512_QUANT_INLINE static __m512 scales(const uint8_t* chunk, int g) {
    return tiles16_load_scales<kF16>(chunk + 4 * kInt4Tile16GroupBytes + 32 * g);
  }
  // The nibbles less 8, in the INT8 tiles' byte order.
  DENSA_TARGET_AVX512_QUANT_INLINE static void signed_codes(const uint8_t* tile, int64_t g0, int64_t count,
                                                            uint8_t* out) {
    const __m512i eight = _mm512_set1_epi8(8);
    for (int64_t g = 0; g < count; ++g) {
      const int64_t gg = g0 + g;
      __m512i wv[8];
      group_nibbles(tile + gg / 4 * kInt4Tile16ChunkBytes + gg % 4 * kInt4Tile16GroupBytes, wv);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm512_store_si512(out + g * 512 + 64 * j, _mm512_sub_epi8(wv[j], eight));
    }
  }
};

}  // namespace

DENSA_TARGET_AVX512_QUANT void int4_tiles16_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  if (a.w->scales_f16 != nullptr) return tiles16_rows<Int4t16Layout<true>>(a, n, r_begin, r_end);
  tiles16_rows<Int4t16Layout<false>>(a, n, r_begin, r_end);
}

}  // namespace densa::matmul_internal
