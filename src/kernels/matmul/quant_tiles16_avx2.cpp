// INT8 and INT4 g32 in 16-row tiles on AVX2 (kernels/internal/matmul_quant_avx2.h): the
// arithmetic of the AVX-512 tile kernels (kernels/internal/tiles16_amx.h) on 8-lane vectors, for
// CPUs without AVX-512. A 16-row tile's 64-byte vectors hold rows 0-7 in their low 32 bytes and
// rows 8-15 in their high 32 bytes, so each half is one ymm operand of 8 rows x 4 codes (lane =
// weight row) and the kernels run the two halves as two 8-row problems. Per group of 32 columns
// (eight 4-column steps, x broadcast 4 bytes at a time):
//  - INT4 (nibbles stored + 8): vpmaddubsw of the unsigned nibbles (0..15) by the int8 q, added
//    as int16 over the group's eight steps (|sum| <= 8 * 2 * 15 * 127 = 30,480: no saturation),
//    widened to int32 pairs by vpmaddwd against ones, started from -8 * sum(q): the exact
//    sum of (nibble - 8) * q.
//  - INT8 (codes stored + 128): the top bit flipped back to the signed code c, then vpmaddubsw
//    of |c| (0..128 as unsigned) by sign(q, c) (|q| <= 127: a pair is at most 2 * 128 * 127 =
//    32,512, no saturation), vpmaddwd to int32 per step: the exact sum of c * q.
// Then acc = fma(float(S), w_scale * x_scale, acc) per group, as the AVX-512 kernels and
// ref::matmul_int8_groups_fp32 do, so all of them give the same bits.
// GEMMs run blocks of 4 x rows against one 8-row half (the codes unpacked once for the 4), the
// decode GEMV one x row against both halves (each 64-byte line read once). Row-major INT8 / INT4
// g32 matrices (row_major_rows) get the same arithmetic, 8 rows at a time.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/cpu_features.h"
#include "kernels/internal/int8t_x.h"
#include "kernels/internal/matmul_affine.h"
#include "kernels/internal/matmul_quant_avx2.h"
#include "kernels/internal/target.h"
#include "quant/activation_q8.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"
#include "quant/int4_group.h"
#include "quant/int8_group.h"

namespace densa::matmul_internal {
namespace {

// 8 row scales (f16, or bf16 for INT4 checkpoints) as fp32, exact.
template <bool kF16>
DENSA_TARGET_AVX2_F16C_INLINE __m256 load_scales8(const uint8_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kF16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// A layout as the kernel reads it:
//   tile(w, t)                 where 16-row tile t starts;
//   scales(chunk, g, h)        group g's row scales of half h as fp32;
//   sums<T, H>(group, h0, xq, s)  the int32 sums of halves h0 .. h0 + H - 1 of a group against
//                              T x rows (xq[t]: the row's q of the group, 4 bytes per step),
//                              before the offset;
//   offset(xc)                 the vector to add to a sum, from the prepared 128 * sum(q) at xc.
template <bool kF16>
struct Int4Tiles {
  static const uint8_t* tile(const WeightView& w, int64_t t) {
    return static_cast<const uint8_t*>(w.data) + t * (w.cols / kInt4Tile16Cols) * kInt4Tile16ChunkBytes;
  }
  static constexpr int64_t kChunkBytes = kInt4Tile16ChunkBytes, kGroupBytes = kInt4Tile16GroupBytes;
  DENSA_TARGET_AVX2_F16C_INLINE static __m256 scales(const uint8_t* chunk, int g, int h) {
    return load_scales8<kF16>(chunk + 4 * kInt4Tile16GroupBytes + 32 * g + 16 * h);
  }
  // -8 * sum(q) from the prepared 128 * sum(q) (exact: a multiple of 16), as a vector.
  DENSA_TARGET_AVX2_F16C_INLINE static __m256i offset(const int32_t* xc) {
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_srai_epi32(_mm256_set1_epi32(*xc), 4));
  }
  // Vector m of a group: low nibbles are columns 4 m .. 4 m + 3 (step m), high nibbles columns
  // 16 + 4 m .. (step m + 4).
  template <int T, int H>
  DENSA_TARGET_AVX2_F16C_INLINE static void sums(const uint8_t* group, int h0, const int32_t* const (&xq)[T],
                                                 __m256i (&s)[T][H]) {
    const __m256i low = _mm256_set1_epi8(0x0f);
    __m256i s16[T][H];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) s16[t][h] = _mm256_setzero_si256();
    }
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 64 * m + 32 * (h0 + h)));
        const __m256i lo = _mm256_and_si256(p, low), hi = _mm256_and_si256(_mm256_srli_epi16(p, 4), low);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          // Saturating adds, which never saturate here (the bound above), give the plain sums;
          // unlike plain adds GCC does not reassociate them into a tree over all the products.
          s16[t][h] = _mm256_adds_epi16(s16[t][h], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(xq[t][m])));
          s16[t][h] = _mm256_adds_epi16(s16[t][h], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(xq[t][m + 4])));
        }
      }
    }
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) s[t][h] = _mm256_madd_epi16(s16[t][h], ones);
    }
  }
};

struct Int8Tiles {
  static const uint8_t* tile(const WeightView& w, int64_t t) {
    return static_cast<const uint8_t*>(w.data) + t * (w.cols / kInt8TileCols) * kInt8TileChunkBytes;
  }
  static constexpr int64_t kChunkBytes = kInt8TileChunkBytes, kGroupBytes = kInt8TileGroupBytes;
  DENSA_TARGET_AVX2_F16C_INLINE static __m256 scales(const uint8_t* chunk, int g, int h) {
    return load_scales8<true>(chunk + 4 * kInt8TileGroupBytes + 32 * g + 16 * h);
  }
  DENSA_TARGET_AVX2_F16C_INLINE static __m256i offset(const int32_t*) { return _mm256_setzero_si256(); }  // signed codes
  // Vector j of a group: columns 4 j .. 4 j + 3 (step j), stored + 128.
  template <int T, int H>
  DENSA_TARGET_AVX2_F16C_INLINE static void sums(const uint8_t* group, int h0, const int32_t* const (&xq)[T],
                                                 __m256i (&s)[T][H]) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) s[t][h] = _mm256_setzero_si256();
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const __m256i c = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 64 * j + 32 * (h0 + h))), flip);
        const __m256i a = _mm256_abs_epi8(c);  // -128 gives 0x80: 128 as the unsigned operand
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i p = _mm256_maddubs_epi16(a, _mm256_sign_epi8(_mm256_set1_epi32(xq[t][j]), c));
          s[t][h] = _mm256_add_epi32(s[t][h], _mm256_madd_epi16(p, ones));
        }
      }
    }
  }
};

// Group g of chunk c (at ch) against T x rows: the exact sums, then one fma per output.
template <class L, int T, int H>
DENSA_TARGET_AVX2_F16C_INLINE void tile_group(const uint8_t* ch, int64_t c, int g, int h0, const Int8tXRow (&rows)[T],
                                              __m256 (&acc)[T][H]) {
  const int64_t gg = c * 4 + g;
  const int32_t* xq[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) xq[t] = rows[t].q + 128 * gg;
  __m256i s[T][H];
  L::template sums<T, H>(ch + g * L::kGroupBytes, h0, xq, s);
#pragma GCC unroll 2
  for (int h = 0; h < H; ++h) {
    const __m256 ws = L::scales(ch, g, h0 + h);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i sum = _mm256_add_epi32(s[t][h], L::offset(rows[t].xc + gg));
      acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(ws, _mm256_set1_ps(rows[t].xs[gg])), acc[t][h]);
    }
  }
}

// T x rows from i0 against halves h0 .. h0 + H - 1 of 16-row tile t16; kUnroll: a chunk's four
// groups unrolled (the decode GEMV, one x row: measured faster so), else a loop (the GEMM's
// wider register state spills when unrolled).
template <class L, int T, int H, bool kUnroll>
DENSA_TARGET_AVX2_F16C_INLINE void tile_body(const WeightView& w, const uint8_t* xp, int64_t x_stride, float* y,
                                             int64_t t16, int h0, int64_t i0) {
  const uint8_t* tile = L::tile(w, t16);
  const int64_t chunks = w.cols / 128;
  Int8tXRow rows[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) rows[t] = int8t_x_row(xp, x_stride, w.cols, i0 + t);
  __m256 acc[T][H];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  }
  for (int64_t c = 0; c < chunks; ++c) {
    const uint8_t* ch = tile + c * L::kChunkBytes;
    if constexpr (kUnroll) {
      tile_group<L, T, H>(ch, c, 0, h0, rows, acc);
      tile_group<L, T, H>(ch, c, 1, h0, rows, acc);
      tile_group<L, T, H>(ch, c, 2, h0, rows, acc);
      tile_group<L, T, H>(ch, c, 3, h0, rows, acc);
    } else {
#pragma GCC unroll 1
      for (int g = 0; g < 4; ++g) tile_group<L, T, H>(ch, c, g, h0, rows, acc);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) _mm256_storeu_ps(y + (i0 + t) * w.rows + t16 * 16 + 8 * (h0 + h), acc[t][h]);
  }
}

// The GEMM's blocks (DENSA_NO_TREE_REASSOC: kernels/internal/target.h).
template <class L, int T>
DENSA_NO_TREE_REASSOC DENSA_TARGET_AVX2_F16C void tile_gemm(
    const WeightView& w, const uint8_t* xp, int64_t x_stride, float* y, int64_t t16, int h, int64_t i0) {
  tile_body<L, T, 1, false>(w, xp, x_stride, y, t16, h, i0);
}

// The decode GEMV: one x row against both halves, so each 64-byte line is read once.
template <class L>
DENSA_TARGET_AVX2_F16C void tile_gemv(const WeightView& w, const uint8_t* xp, int64_t x_stride, float* y, int64_t t16) {
  tile_body<L, 1, 2, true>(w, xp, x_stride, y, t16, 0, 0);
}

template <class L>
DENSA_TARGET_AVX2_F16C void layout_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin,
                                        int64_t r_end) {
  CHECK(r_begin % 16 == 0 && r_end % 16 == 0) << "16-row tiles: rows " << r_begin << ".." << r_end;
  const int64_t stride = int8t_x_stride(w.cols);
  if (n == 1) {
    for (int64_t t16 = r_begin / 16; t16 < r_end / 16; ++t16) tile_gemv<L>(w, xp, stride, y, t16);
    return;
  }
  const int64_t block = std::max<int64_t>(kAvx2TileX, kAvx2XBlockBytes / stride / kAvx2TileX * kAvx2TileX);
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min(n, b0 + block);
    for (int64_t t16 = r_begin / 16; t16 < r_end / 16; ++t16) {
      for (int h = 0; h < 2; ++h) {
        int64_t i = b0;
        for (; i + 4 <= b1; i += 4) tile_gemm<L, 4>(w, xp, stride, y, t16, h, i);
        for (; i < b1; ++i) tile_gemm<L, 1>(w, xp, stride, y, t16, h, i);
      }
    }
  }
}

// Row-major INT4 g32 / INT8 g32 (matrices the tiles do not take: rows % 16 or cols % 128 not
// zero, as a tensor-parallel slice can be, or --int4-layout / --int8-layout rows), with the
// tiles' arithmetic: per weight row one group at a time, the group's 32 codes in column order
// against the x row's 32 q (vpmaddubsw, vpmaddwd: eight int32 partial sums, exact), 8 rows'
// partial sums reduced to one exact int32 per row by a transpose, then the same fma per group.
// So a matrix gives the same bits in either layout, and as the twin.
DENSA_TARGET_AVX2_F16C_INLINE __m256i row_group_codes(const WeightView& w, int64_t r, int64_t g) {
  if (w.dtype == DType::kI8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.row_ptr(r) + 32 * g));
  // Byte j of the group: element 2 j in its low nibble, 2 j + 1 in its high one.
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.row_ptr(r) + 16 * g));
  const __m128i low = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(b, low), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
  return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

// Rows [r0, r0 + R) (R <= 8) against x row i.
template <int R>
DENSA_TARGET_AVX2_F16C void rows_block(const WeightView& w, const uint8_t* xp, int64_t x_stride, float* y, int64_t r0,
                                       int64_t i) {
  const bool int4 = w.dtype == DType::kI4;
  const Int8tXRow x = int8t_x_row(xp, x_stride, w.cols, i);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t g = 0; g < w.cols / 32; ++g) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + 128 * g));
    __m256i v[8];
    alignas(32) float ws[8] = {};
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      if (r >= R) {
        v[r] = _mm256_setzero_si256();
        continue;
      }
      const __m256i c = row_group_codes(w, r0 + r, g);
      // INT4: unsigned nibbles by q; INT8: |code| by sign(q, code).
      const __m256i p = int4 ? _mm256_maddubs_epi16(c, xq) : _mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(xq, c));
      v[r] = _mm256_madd_epi16(p, ones);
      ws[r] = int4 ? int4_group_scale(w, r0 + r, g) : int8_group_scale(w, r0 + r, g);
    }
    const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
    __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
    if (int4) sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(x.xc[g] >> 4));  // the nibbles' + 8
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(_mm256_load_ps(ws), _mm256_set1_ps(x.xs[g])), acc);
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, acc);
  for (int r = 0; r < R; ++r) y[i * w.rows + r0 + r] = out[r];
}

DENSA_TARGET_AVX2_F16C void row_major_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin,
                                           int64_t r_end) {
  const int64_t stride = int8t_x_stride(w.cols);
  int64_t r = r_begin;
  for (; r + 8 <= r_end; r += 8) {
    for (int64_t i = 0; i < n; ++i) rows_block<8>(w, xp, stride, y, r, i);
  }
  for (; r < r_end; ++r) {
    for (int64_t i = 0; i < n; ++i) rows_block<1>(w, xp, stride, y, r, i);
  }
}

// One group of 32: activation_q8_quantize's arithmetic (fp32, in its order) on 8-lane vectors.
DENSA_TARGET_AVX2_F16C_INLINE int32_t quantize_group(const float* x, int8_t* q, float* scale) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 v[4], a[4];
  int finite = 0xff;
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    a[k] = _mm256_and_ps(v[k], abs_mask);
    finite &= _mm256_movemask_ps(_mm256_cmp_ps(a[k], inf, _CMP_LT_OQ));  // false for NaN and inf
  }
  __m256 m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);  // the maximum of finite values: exact in any order
  const float inv = 127.0f / amax;
  if (finite != 0xff || !std::isfinite(inv)) {  // NaN / inf in the group; all zero, or too small
    *scale = finite == 0xff ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    std::memset(q, 0, 32);
    return 0;
  }
  *scale = amax / 127.0f;
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  __m256i qi[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {  // MXCSR default rounding: half to even, as nearbyint
    qi[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], _mm256_set1_ps(inv)));
    qi[k] = _mm256_max_epi32(_mm256_min_epi32(qi[k], hi), lo);
  }
  // int32 -> int8 by two saturating packs (in range already), which interleave 128-bit lanes;
  // the dword permute puts the 32 bytes back in order.
  const __m256i p16a = _mm256_packs_epi32(qi[0], qi[1]), p16b = _mm256_packs_epi32(qi[2], qi[3]);
  const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p8);
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
  return _mm_cvtsi128_si32(s4);
}

DENSA_TARGET_AVX2_F16C void prepare_row(const float* x, int64_t cols, uint8_t* xp, int64_t i) {
  const Int8tXRow row = int8t_x_row(xp, int8t_x_stride(cols), cols, i);
  auto* q = reinterpret_cast<int8_t*>(const_cast<int32_t*>(row.q));
  auto* sx = const_cast<float*>(row.xs);
  auto* corr = const_cast<int32_t*>(row.xc);
  for (int64_t g = 0; g < cols / 32; ++g) corr[g] = 128 * quantize_group(x + 32 * g, q + 512 * g, sx + g);
}

}  // namespace

bool matmul_quant_avx2_tiles_supported() {
  return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx2);
}

bool matmul_quant_avx2_supports(const WeightView& w) {
  if (!matmul_quant_avx2_tiles_supported()) return false;
  if (is_affine_rows(w.dtype)) {  // GGUF K-quants / IQ4 / MXFP4 (kernels/matmul/matmul_affine_avx2.cpp)
    return w.cols % kAffineBlock == 0 &&
           (w.layout == WeightLayout::kRows || (w.layout == WeightLayout::kAffineTiles16 && w.rows % kAffineTileRows == 0));
  }
  if (w.dtype != DType::kI8 && w.dtype != DType::kI4) return false;
  if ((w.scales_bf16 == nullptr) == (w.scales_f16 == nullptr) || w.scale_cols != 32 || w.cols % 32 != 0) return false;
  if (w.dtype == DType::kI8 && w.scales_f16 == nullptr) return false;  // INT8 (Q8_0) keeps f16 scales
  if (w.layout == WeightLayout::kRows) return w.scale_rows == 1;
  if (w.rows % 16 != 0 || w.cols % 128 != 0) return false;
  return w.layout == (w.dtype == DType::kI8 ? WeightLayout::kInt8Tiles16 : WeightLayout::kInt4Tiles16);
}

int64_t matmul_quant_avx2_x_bytes(const WeightView& w, int64_t n) {
  if (is_affine_rows(w.dtype)) return n * affine_tiles_x_stride(w.dtype, w.cols);
  return int8t_x_bytes(w.cols, n);
}

bool matmul_quant_avx2_same_x_layout(const WeightView& a, const WeightView& b) {
  if (a.cols != b.cols || is_affine_rows(a.dtype) != is_affine_rows(b.dtype)) return false;
  // The affine preparation depends on the dtype through its weight group only.
  return !is_affine_rows(a.dtype) || affine_group(a.dtype) == affine_group(b.dtype);
}

void matmul_quant_avx2_prepare_rows(const WeightView& w, const float* x, int64_t n, int64_t i_begin, int64_t i_end,
                                    uint8_t* xp) {
  CHECK(i_begin >= 0 && i_end <= n && w.cols % 32 == 0) << "prepare: rows " << i_begin << ".." << i_end;
  if (is_affine_rows(w.dtype)) {
    const int64_t stride = affine_tiles_x_stride(w.dtype, w.cols);
    for (int64_t i = i_begin; i < i_end; ++i) affine_tiles_prepare_x_avx2(x + i * w.cols, w.cols, w.dtype, xp + i * stride);
    return;
  }
  for (int64_t i = i_begin; i < i_end; ++i) prepare_row(x + i * w.cols, w.cols, xp, i);
}

void matmul_quant_avx2_gather_rows(const WeightView& w, const uint8_t* src, const int32_t* rows, int64_t n,
                                   int64_t i_begin, int64_t i_end, uint8_t* dst) {
  if (is_affine_rows(w.dtype)) {  // whole rows of one stride
    const int64_t stride = affine_tiles_x_stride(w.dtype, w.cols);
    for (int64_t i = i_begin; i < i_end; ++i) {
      std::memcpy(dst + i * stride, src + rows[i] * stride, static_cast<size_t>(stride));
    }
    return;
  }
  int8t_x_gather(src, w.cols, rows, n, i_begin, i_end, dst);
}

DENSA_TARGET_AVX2_F16C void activation_q8_quantize_avx2(const float* x, int64_t cols, int8_t* q, float* sx) {
  CHECK(cols % 32 == 0) << "activation_q8_quantize_avx2: cols " << cols;
  for (int64_t g = 0; g < cols / 32; ++g) quantize_group(x + 32 * g, q + 32 * g, sx + g);
}

void matmul_quant_avx2_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin,
                            int64_t r_end) {
  CHECK(matmul_quant_avx2_supports(w)) << "matmul avx2: " << dtype_name(w.dtype) << " " << w.rows << "x" << w.cols;
  if (n <= 0 || r_begin >= r_end) return;
  if (is_affine_rows(w.dtype)) {
    return affine_rows_avx2(w, xp, affine_tiles_x_stride(w.dtype, w.cols), n, y, r_begin, r_end);
  }
  if (w.layout == WeightLayout::kRows) return row_major_rows(w, xp, n, y, r_begin, r_end);
  if (w.dtype == DType::kI8) return layout_rows<Int8Tiles>(w, xp, n, y, r_begin, r_end);
  if (w.scales_f16 != nullptr) return layout_rows<Int4Tiles<true>>(w, xp, n, y, r_begin, r_end);
  layout_rows<Int4Tiles<false>>(w, xp, n, y, r_begin, r_end);
}

int64_t matmul_quant_avx2_row_cost(const WeightView& w, int64_t n) { return w.row_bytes() + n * w.cols / 2; }

}  // namespace densa::matmul_internal
