// INT4 g32 in 8-row tiles (WeightLayout::kInt4Tiles8) on AVX-512 with GFNI (kernels/internal/
// matmul_quant_avx512_kernels.h): the same bits as the row-major INT4 kernel.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/matmul_quant_avx512_kernels.h"

namespace densa::matmul_internal {
namespace {

// INT4 g32 in 8-row tiles (WeightLayout::kInt4Tiles8, core/tensor_view.h): a thread's rows
// are one sequential stream. Per 128-column chunk of a tile, one 64-byte load brings the 8
// rows' 32 group scales; they are widened (f16: vcvtph2ps; bf16: a 16-bit shift) and
// multiplied by the x block scales once for all rows (scales_r[4 r + g] * x_scale[g]), and each
// row spreads its 4 products over its 16 lanes with one vpermps. The high nibbles come from one
// gf2p8affineqb (a logical shift right by 4 inside each byte). The int32 sums, the scale
// product w_scale * x_scale, the fma and the reduction are int4_tile's, so both layouts give
// the same bits. R = 8: a whole tile (decode). R = 4: one half of each tile (rows r0 .. r0 + 3,
// r0 % 4 == 0), so a GEMM keeps 4 x 3 accumulators as int4_tile does.
template <bool kF16>
DENSA_TARGET_AVX512_QUANT_GFNI_INLINE __m512 widen_scales(__m256i h) {
  if constexpr (kF16) {
    return _mm512_cvtph_ps(h);
  } else {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Software prefetch distances of the tiled decode kernel, in bytes of its stream: 4 chunks
// (2,304 B) into L1 and 8 KiB into L2. Without them one stream per core was held to what the
// hardware prefetchers keep in flight; chosen by a sweep with `densa bench offline` on an
// Emerald Rapids VM (no prefetch and near only were slower, 12-16 KiB far no better).
constexpr int64_t kTilesPrefetchNear = 4 * kInt4TileChunkBytes;
constexpr int64_t kTilesPrefetchFar = 8192;

template <int R, int NX, bool kF16>
DENSA_TARGET_AVX512_QUANT_GFNI_INLINE void int4_tiles_tile(const Args& a, int64_t r0, int64_t i0) {
  static_assert(R == 8 || R == 4);
  const WeightView& w = *a.w;
  const int64_t chunks = w.cols / kInt4TileCols;
  const int half = static_cast<int>(r0 % kInt4TileRows) / 4;  // R = 4: which half of the tile
  const uint8_t* tp = static_cast<const uint8_t*>(w.data) + r0 / kInt4TileRows * chunks * kInt4TileChunkBytes;
  const __m512i nib = _mm512_set1_epi8(0x0f);
  const __m512i shr4 = _mm512_set1_epi64(0x1020408000000000LL);  // bit i of a byte <- bit i + 4
  // x_pattern[j] = x scale of block j % 4 (the per-lane x scales hold block g at lane 4 g).
  alignas(64) int32_t idx[16];
  for (int j = 0; j < 16; ++j) idx[j] = 4 * (j % 4);
  const __m512i x_pattern_idx = _mm512_load_si512(idx);
  __m512i row_idx[4];  // lane l of row r (mod 4) reads product 4 r + l / 4
  for (int r = 0; r < 4; ++r) {
    for (int l = 0; l < 16; ++l) idx[l] = 4 * r + l / 4;
    row_idx[r] = _mm512_load_si512(idx);
  }
  __m512 acc[R][NX];
  zero_tile<R, NX>(acc);
  for (int64_t c = 0; c < chunks; ++c) {
    const uint8_t* cp = tp + c * kInt4TileChunkBytes;
    if constexpr (NX == 1) {
      // Decode reads one stream per thread; the hardware prefetchers alone keep too few lines
      // in flight for it on some cores (Intel: ~9 of 15 GB/s per core). The next chunks into
      // L1, and the chunk kTilesPrefetchFar ahead into L2.
#pragma GCC unroll 9
      for (int l = 0; l < kInt4TileChunkBytes / 64; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(cp + kTilesPrefetchNear + 64 * l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(cp + kTilesPrefetchFar + 64 * l), _MM_HINT_T1);
      }
    }
    const __m512i sv = _mm512_load_si512(cp + kInt4TileRows * 64);
    __m512 ws[2];  // rows 0-3 and 4-7 of the tile (R = 4: only the half in use)
    if constexpr (R == 8) {
      ws[0] = widen_scales<kF16>(_mm512_castsi512_si256(sv));
      ws[1] = widen_scales<kF16>(_mm512_extracti64x4_epi64(sv, 1));
    } else {
      ws[0] = widen_scales<kF16>(half == 0 ? _mm512_castsi512_si256(sv) : _mm512_extracti64x4_epi64(sv, 1));
    }
    __m512i xe[NX], xo[NX], x0[NX];
    __m512 prod[NX][R / 4];
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const uint8_t* xs = a.xp + (i0 + i) * a.x_stride + c * kInt4ChunkBytes;
      xe[i] = _mm512_loadu_si512(xs);
      xo[i] = _mm512_loadu_si512(xs + 64);
      x0[i] = _mm512_loadu_si512(xs + 192);
      const __m512 xsc = _mm512_permutexvar_ps(x_pattern_idx, _mm512_loadu_ps(reinterpret_cast<const float*>(xs + 128)));
#pragma GCC unroll 2
      for (int h = 0; h < R / 4; ++h) prod[i][h] = _mm512_mul_ps(ws[h], xsc);
    }
    const uint8_t* codes = cp + (R == 4 ? half * 4 * 64 : 0);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512i v = _mm512_load_si512(codes + 64 * r);
      const __m512i lo = _mm512_and_si512(v, nib);
      const __m512i hi = _mm512_gf2p8affine_epi64_epi8(v, shr4, 0);
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        __m512i s = _mm512_dpbusd_epi32(x0[i], lo, xe[i]);
        s = _mm512_dpbusd_epi32(s, hi, xo[i]);
        const __m512 scale = _mm512_permutexvar_ps(row_idx[r % 4], prod[i][r / 4]);
        acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[r][i]);
      }
    }
  }
  store_tile<R, NX>(a, r0, i0, acc);
}

template <int R, int NX, bool kF16>
DENSA_TARGET_AVX512_QUANT_GFNI void int4_tiles_x(const Args& a, int64_t r0, int64_t i0, int64_t n) {
  for (; i0 + NX <= n; i0 += NX) int4_tiles_tile<R, NX, kF16>(a, r0, i0);
  if constexpr (NX > 1) {
    if (i0 < n) int4_tiles_x<R, NX - 1, kF16>(a, r0, i0, n);
  }
}

// Rows [r_begin, r_end) of a tiled view: whole tiles (the matmul split keeps 8-row multiples).
template <bool kF16>
void tiled_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  CHECK(r_begin % kInt4TileRows == 0 && r_end % kInt4TileRows == 0)
      << "matmul int4 tiles: rows " << r_begin << ".." << r_end << " split a tile";
  if (n == 1) {
    for (int64_t r = r_begin; r < r_end; r += 8) int4_tiles_x<8, 1, kF16>(a, r, 0, n);
  } else {
    for (int64_t r = r_begin; r < r_end; r += 4) int4_tiles_x<4, 3, kF16>(a, r, 0, n);
  }
}

}  // namespace

void int4_tiles_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  return a.w->scales_f16 != nullptr ? tiled_rows<true>(a, n, r_begin, r_end) : tiled_rows<false>(a, n, r_begin, r_end);
}

}  // namespace densa::matmul_internal
