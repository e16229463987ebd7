// AVX2 kernels for affine rows (GGUF K-quants, IQ4, MXFP4; quant/affine_rows.h), in the 16-row
// tile layout (WeightLayout::kAffineTiles16) and row-major, for CPUs without AVX-512. Both
// compute the tile layout's arithmetic (kernels/internal/matmul_affine.h): per output and per
// weight group in column order, the exact int32 sum S of code * q, then
// acc = fma(float(S), scale * xs, acc) and acc = fma(min, term, acc). So they give the bits of
// the AVX-512 VNNI and AMX-INT8 tile kernels and of ref::matmul_affine_groups_fp32, for every
// n and either layout. x is prepared as the AVX-512 tile kernels prepare it (q in column order,
// one scale per 32 columns, one term per weight group), byte for byte.
//
// AVX2 has no unsigned-by-signed dot product that cannot saturate for codes up to 255
// (vpmaddubsw adds two int8 products into int16: 2 * 255 * 127 overflows). So a code c is
// taken as two 4-bit planes, c = 16 * hi + lo: vpmaddubsw of each plane (0..15) by the int8 q
// gives int16 pairs of at most 2 * 15 * 127 = 3,810, added over a group's eight 4-column steps
// (at most 30,480: no saturation), then widened by vpmaddwd against 1 (lo) and 16 (hi):
// S = sum(lo * q) + 16 * sum(hi * q), exact. Types whose codes are the nibbles themselves
// (kA4G32, kA4K: 0..15) need the low plane only; the other 4-bit types look their two planes up
// from the nibble (two vpshufb per nibble vector). The tiles' 8-bit codes take the cheapest
// exact form their range allows, per group and half (byte_sums): below 16 one plane, below 64
// (every Q6_K, Q5_K, Q5_0 and Q5_1 code) the codes themselves over pairs of steps, else the
// two planes.
//
// Tiles: a 16-row tile's 64-byte vectors hold rows 0-7 in their low 32 bytes and rows 8-15 in
// their high 32 bytes (lane = weight row), so each half is an 8-row problem. GEMMs run 4 x rows
// against one half (the planes made once for the 4), in x blocks that stay in L2; the decode
// GEMV runs one x row against both halves (each line read once). Row-major matrices (those the
// tiles do not take: rows % 16 != 0, as a tensor-parallel slice can be, or a load without
// tiles) take one row at a time per group, 8 rows' partial sums reduced by a transpose.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/internal/matmul_affine.h"
#include "kernels/internal/matmul_quant_avx2.h"
#include "kernels/internal/target.h"
#include "quant/activation_q8.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"

namespace densa::matmul_internal {
namespace {

template <DType T>
struct Fmt {
  static constexpr bool kNibbles = is_affine_nibbles(T), kSuper = is_affine_super(T), kG16 = T == DType::kA8K16;
  // Codes that are the nibbles themselves (0..15): one plane. Other nibbles are looked up.
  static constexpr bool kOnePlane = T == DType::kA4G32 || T == DType::kA4K;
  static constexpr bool kLut = kNibbles && !kOnePlane;
  static constexpr int64_t kBlockBytes = dtype_block_bytes(T);
  static constexpr int64_t kTileBlockBytes = kAffineTileRows * kBlockBytes;
  static constexpr int64_t kTileCodeBytes = kAffineTileRows * affine_code_bytes(T);
  static constexpr int kGroups = static_cast<int>(affine_groups_per_block(T));
};


// The two 16-entry tables of a looked-up type's codes: low 4 bits and high 4 bits, in both lanes.
struct Luts {
  __m256i lo, hi;
};

template <DType T>
DENSA_TARGET_AVX2_F16C_INLINE Luts make_luts() {
  Luts l{_mm256_setzero_si256(), _mm256_setzero_si256()};
  if constexpr (Fmt<T>::kLut) {
    const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(affine_nibble_codes(T)));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    l.lo = _mm256_broadcastsi128_si256(_mm_and_si128(codes, low4));
    l.hi = _mm256_broadcastsi128_si256(_mm_and_si128(_mm_srli_epi16(codes, 4), low4));
  }
  return l;
}

// The code planes (lo, hi: 0..15 each) of a vector of nibbles (0..15) of a 4-bit type.
template <DType T>
DENSA_TARGET_AVX2_F16C_INLINE void nibble_planes(__m256i nib, const Luts& luts, __m256i& lo, __m256i& hi) {
  if constexpr (Fmt<T>::kLut) {
    lo = _mm256_shuffle_epi8(luts.lo, nib);
    hi = _mm256_shuffle_epi8(luts.hi, nib);
  } else {
    lo = nib;
    hi = _mm256_setzero_si256();
  }
}

// The code planes of a vector of 8-bit codes.
DENSA_TARGET_AVX2_F16C_INLINE void byte_planes(__m256i c, __m256i& lo, __m256i& hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  lo = _mm256_and_si256(c, low4);
  hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), low4);
}

// Per-lane int16 partial sums of one group's planes against one x row.
template <bool kTwoPlanes>
struct Partial {
  __m256i lo, hi;
  DENSA_TARGET_AVX2_F16C_INLINE void clear() {
    lo = _mm256_setzero_si256();
    if constexpr (kTwoPlanes) hi = _mm256_setzero_si256();
  }
  // Saturating adds, which never saturate here (the bound above), give the plain sums; unlike
  // plain adds GCC does not reassociate them into a tree over all the products.
  DENSA_TARGET_AVX2_F16C_INLINE void add(__m256i plo, __m256i phi, __m256i x) {
    lo = _mm256_adds_epi16(lo, _mm256_maddubs_epi16(plo, x));
    if constexpr (kTwoPlanes) hi = _mm256_adds_epi16(hi, _mm256_maddubs_epi16(phi, x));
  }
  // The exact int32 sums (8 lanes, one per 4-column pair of pairs as vpmaddwd pairs them).
  DENSA_TARGET_AVX2_F16C_INLINE __m256i widen() const {
    const __m256i s = _mm256_madd_epi16(lo, _mm256_set1_epi16(1));
    if constexpr (!kTwoPlanes) return s;
    return _mm256_add_epi32(s, _mm256_madd_epi16(hi, _mm256_set1_epi16(16)));
  }
};

// The one fp32 step every kernel of this arithmetic ends a group with.
DENSA_TARGET_AVX2_F16C_INLINE __m256 group_fma(__m256 acc, __m256i sum, __m256 ws, float xs, __m256 mins, float term) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(ws, _mm256_set1_ps(xs)), acc);
  return _mm256_fmadd_ps(mins, _mm256_set1_ps(term), acc);
}

// Group g's scale and min for half h of a tile block (lane = row 8 h + lane): fp32 as stored,
// or D * s and M * m (exact products).
template <DType T>
DENSA_TARGET_AVX2_F16C_INLINE void tile_scales(const uint8_t* blk, int g, int h, __m256& ws, __m256& mins) {
  const uint8_t* s = blk + Fmt<T>::kTileCodeBytes;
  if constexpr (Fmt<T>::kSuper) {
    const __m128i s8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 128 + 16 * g + 8 * h));
    const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 128 + 16 * (Fmt<T>::kGroups + g) + 8 * h));
    ws = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), _mm256_loadu_ps(reinterpret_cast<const float*>(s + 32 * h)));
    mins = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(m8)),
                         _mm256_loadu_ps(reinterpret_cast<const float*>(s + 64 + 32 * h)));
  } else {
    ws = _mm256_loadu_ps(reinterpret_cast<const float*>(s + 64 * g + 32 * h));
    mins = _mm256_loadu_ps(reinterpret_cast<const float*>(s + 256 + 64 * g + 32 * h));
  }
}

// Group g's step into acc[t][slot] for half h of the tile from the NT rows' exact sums.
template <DType T, int NT, int H>
DENSA_TARGET_AVX2_F16C_INLINE void finish_half(const uint8_t* blk, int g, int h, const __m256i (&sums)[NT],
                                               const float (&xs)[NT], const float* const (&term)[NT],
                                               __m256 (&acc)[NT][H], int slot) {
  __m256 ws, mins;
  tile_scales<T>(blk, g, h, ws, mins);
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) acc[t][slot] = group_fma(acc[t][slot], sums[t], ws, xs[t], mins, term[t][g]);
}

// Finishes weight group g from its partial sums, halves h0 .. h0 + H - 1, into acc[t][h].
template <DType T, int NT, int H, bool kTwo>
DENSA_TARGET_AVX2_F16C_INLINE void finish_group(const uint8_t* blk, int g, int h0, const Partial<kTwo> (&p)[NT][H],
                                                const float (&xs)[NT], const float* const (&term)[NT],
                                                __m256 (&acc)[NT][H]) {
#pragma GCC unroll 2
  for (int h = 0; h < H; ++h) {
    __m256i sums[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) sums[t] = p[t][h].widen();
    finish_half<T, NT, H>(blk, g, h0 + h, sums, xs, term, acc, h);
  }
}

// The exact int32 sums of steps [s0, s0 + S) of one half of an 8-bit group (step s's vector at
// v + 64 s) against NT x rows. The codes' range picks the cheapest exact form, which changes no
// sum: all below 16, one plane added in int16 over every step (pairs of at most 2 * 15 * 127,
// 8 steps at most 30,480); all below 64 (every Q6_K, Q5_K, Q5_0 / Q5_1 code), the codes
// themselves added in int16 over two steps (at most 4 * 63 * 127 = 32,004) and widened per two;
// else the two planes.
DENSA_TARGET_AVX2_F16C_INLINE __m256i step_codes(const uint8_t* v, int s) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 64 * s));
}

template <int NT, int S>
DENSA_TARGET_AVX2_F16C_INLINE void byte_sums(const uint8_t* v, const int32_t* const (&x4)[NT], int s0,
                                             __m256i (&out)[NT]) {
  __m256i any = step_codes(v, s0);
#pragma GCC unroll 8
  for (int s = s0 + 1; s < s0 + S; ++s) any = _mm256_or_si256(any, step_codes(v, s));
  const __m256i ones = _mm256_set1_epi16(1);
  if (_mm256_testz_si256(any, _mm256_set1_epi8(static_cast<char>(0xf0)))) {
    __m256i a[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) a[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = s0; s < s0 + S; ++s) {
      const __m256i c = step_codes(v, s);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) a[t] = _mm256_adds_epi16(a[t], _mm256_maddubs_epi16(c, _mm256_set1_epi32(x4[t][s])));
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) out[t] = _mm256_madd_epi16(a[t], ones);
  } else if (_mm256_testz_si256(any, _mm256_set1_epi8(static_cast<char>(0xc0)))) {
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) out[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int s = s0; s < s0 + S; s += 2) {
      const __m256i c0 = step_codes(v, s), c1 = step_codes(v, s + 1);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m256i pair = _mm256_adds_epi16(_mm256_maddubs_epi16(c0, _mm256_set1_epi32(x4[t][s])),
                                               _mm256_maddubs_epi16(c1, _mm256_set1_epi32(x4[t][s + 1])));
        out[t] = _mm256_add_epi32(out[t], _mm256_madd_epi16(pair, ones));
      }
    }
  } else {
    Partial<true> p[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) p[t].clear();
#pragma GCC unroll 8
    for (int s = s0; s < s0 + S; ++s) {
      __m256i lo, hi;
      byte_planes(step_codes(v, s), lo, hi);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) p[t].add(lo, hi, _mm256_set1_epi32(x4[t][s]));
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) out[t] = p[t].widen();
  }
}

// 32-column group j of tile block blk against NT x rows (x4[t]: the rows' q of the group as 4-byte
// steps) for halves h0 .. h0 + H - 1: the finished group steps into acc[t][h].
template <DType T, int NT, int H>
DENSA_TARGET_AVX2_F16C_INLINE void tile_group(const uint8_t* blk, int j, int h0, const Luts& luts,
                                              const int32_t* const (&x4)[NT], const float (&xs)[NT],
                                              const float* const (&term)[NT], __m256 (&acc)[NT][H]) {
  using F = Fmt<T>;
  if constexpr (F::kNibbles) {
    constexpr bool kTwo = !F::kOnePlane;
    Partial<kTwo> p[NT][H];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) p[t][h].clear();
    }
    // Vector m: low nibbles are step m (columns 4m .. 4m + 3), high nibbles step m + 4.
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 256 * j + 64 * m + 32 * (h0 + h)));
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        __m256i a_lo, a_hi, b_lo, b_hi;
        nibble_planes<T>(_mm256_and_si256(v, low4), luts, a_lo, a_hi);
        nibble_planes<T>(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), luts, b_lo, b_hi);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          p[t][h].add(a_lo, a_hi, _mm256_set1_epi32(x4[t][m]));
          p[t][h].add(b_lo, b_hi, _mm256_set1_epi32(x4[t][m + 4]));
        }
      }
    }
    finish_group<T, NT, H, kTwo>(blk, j, h0, p, xs, term, acc);
  } else {
    // Vector s: step s (columns 4s .. 4s + 3); groups of 16 end after steps 3 and 7. Each half
    // finishes its own groups (the fp32 chains of the two halves are independent).
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      const uint8_t* v = blk + 512 * j + 32 * (h0 + h);
      __m256i sums[NT];
      if constexpr (F::kG16) {
        byte_sums<NT, 4>(v, x4, 0, sums);
        finish_half<T, NT>(blk, 2 * j, h0 + h, sums, xs, term, acc, h);
        byte_sums<NT, 4>(v, x4, 4, sums);
        finish_half<T, NT>(blk, 2 * j + 1, h0 + h, sums, xs, term, acc, h);
      } else {
        byte_sums<NT, 8>(v, x4, 0, sums);
        finish_half<T, NT>(blk, j, h0 + h, sums, xs, term, acc, h);
      }
    }
  }
}

const uint8_t* tile_base(const WeightView& w, int64_t tile, int64_t tile_block_bytes) {
  return static_cast<const uint8_t*>(w.data) + tile * (w.cols / kAffineBlock) * tile_block_bytes;
}

// NT x rows from i0 against halves h0 .. h0 + H - 1 of 16-row tile `tile`.
template <DType T, int NT, int H>
DENSA_TARGET_AVX2_F16C_INLINE void tile_body(const WeightView& w, const uint8_t* xp, int64_t x_stride, float* y,
                                             int64_t tile, int h0, int64_t i0) {
  using F = Fmt<T>;
  const uint8_t* base = tile_base(w, tile, F::kTileBlockBytes);
  const Luts luts = make_luts<T>();
  AffineXRow xr[NT];
  __m256 acc[NT][H];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
    xr[t] = affine_x_row(xp, x_stride, w.cols, i0 + t);
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < w.cols / kAffineBlock; ++b) {
    const uint8_t* blk = base + b * F::kTileBlockBytes;
#pragma GCC unroll 1
    for (int j = 0; j < 4; ++j) {
      const int32_t* x4[NT];
      float xs[NT];
      const float* term[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        x4[t] = reinterpret_cast<const int32_t*>(xr[t].q + b * kAffineBlock + 32 * j);
        xs[t] = xr[t].xs[b * 4 + j];
        term[t] = xr[t].term + b * F::kGroups;
      }
      tile_group<T, NT, H>(blk, j, h0, luts, x4, xs, term, acc);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      _mm256_storeu_ps(y + (i0 + t) * w.rows + tile * kAffineTileRows + 8 * (h0 + h), acc[t][h]);
    }
  }
}

// DENSA_NO_TREE_REASSOC: kernels/internal/target.h.
template <DType T, int NT>
DENSA_NO_TREE_REASSOC DENSA_TARGET_AVX2_F16C void tile_gemm(const WeightView& w, const uint8_t* xp,
                                                                   int64_t x_stride, float* y, int64_t tile, int h,
                                                                   int64_t i0) {
  tile_body<T, NT, 1>(w, xp, x_stride, y, tile, h, i0);
}

template <DType T>
DENSA_NO_TREE_REASSOC DENSA_TARGET_AVX2_F16C void tile_gemv(const WeightView& w, const uint8_t* xp,
                                                                   int64_t x_stride, float* y, int64_t tile) {
  tile_body<T, 1, 2>(w, xp, x_stride, y, tile, 0, 0);
}

template <DType T>
void tiles_rows(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y, int64_t r_begin,
                int64_t r_end) {
  const int64_t t_begin = r_begin / kAffineTileRows, t_end = r_end / kAffineTileRows;
  if (n == 1) {
    for (int64_t tile = t_begin; tile < t_end; ++tile) tile_gemv<T>(w, xp, x_stride, y, tile);
    return;
  }
  const int64_t block = std::max<int64_t>(kAvx2TileX, kAvx2XBlockBytes / x_stride / kAvx2TileX * kAvx2TileX);
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min(n, b0 + block);
    for (int64_t tile = t_begin; tile < t_end; ++tile) {
      for (int h = 0; h < 2; ++h) {
        int64_t i = b0;
        for (; i + 4 <= b1; i += 4) tile_gemm<T, 4>(w, xp, x_stride, y, tile, h, i);
        for (; i < b1; ++i) tile_gemm<T, 1>(w, xp, x_stride, y, tile, h, i);
      }
    }
  }
}

// Row-major: the 32 codes of group j of block b of row r in column order, as two planes.
template <DType T>
DENSA_TARGET_AVX2_F16C_INLINE void row_group_planes(const uint8_t* blk, int j, const Luts& luts, __m256i& lo,
                                                    __m256i& hi) {
  if constexpr (Fmt<T>::kNibbles) {
    // Byte 16 j + e: column e in its low nibble, column 16 + e in its high nibble.
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * j));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low4), _mm_and_si128(b, low4));
    nibble_planes<T>(nib, luts, lo, hi);
  } else {
    byte_planes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 * j)), lo, hi);
  }
}

// Group g's scale and min of a row-major block.
template <DType T>
inline void row_scales(const uint8_t* blk, int g, float& scale, float& min) {
  const uint8_t* s = blk + affine_code_bytes(T);
  if constexpr (Fmt<T>::kSuper) {
    float d, m;
    std::memcpy(&d, s, 4);
    std::memcpy(&m, s + 4, 4);
    scale = d * static_cast<float>(static_cast<int8_t>(s[8 + g]));
    min = m * static_cast<float>(static_cast<int8_t>(s[8 + Fmt<T>::kGroups + g]));
  } else {
    std::memcpy(&scale, s + 4 * g, 4);
    std::memcpy(&min, s + 16 + 4 * g, 4);
  }
}

// Weight rows [r0, r0 + R) (R <= 8) against x row i: per 32 columns, each row's 8 int32 partial
// sums (lanes 0-3: columns 0-15, lanes 4-7: columns 16-31), reduced to one exact sum per row
// and 16-column half by a transpose.
template <DType T, int R>
DENSA_NO_TREE_REASSOC DENSA_TARGET_AVX2_F16C void rows_block(const WeightView& w, const uint8_t* xp,
                                                                    int64_t x_stride, float* y, int64_t r0, int64_t i) {
  using F = Fmt<T>;
  const AffineXRow x = affine_x_row(xp, x_stride, w.cols, i);
  const Luts luts = make_luts<T>();
  const __m256i ones = _mm256_set1_epi16(1), sixteens = _mm256_set1_epi16(16);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < w.cols / kAffineBlock; ++b) {
    for (int j = 0; j < 4; ++j) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + b * kAffineBlock + 32 * j));
      __m256i v[8];
      alignas(32) float ws[2][8] = {}, mins[2][8] = {};
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        if (r >= R) {
          v[r] = _mm256_setzero_si256();
          continue;
        }
        const uint8_t* blk = w.row_ptr(r0 + r) + b * F::kBlockBytes;
        __m256i lo, hi;
        row_group_planes<T>(blk, j, luts, lo, hi);
        v[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xq), ones);
        if constexpr (!F::kOnePlane) v[r] = _mm256_add_epi32(v[r], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xq), sixteens));
        if constexpr (F::kG16) {
          row_scales<T>(blk, 2 * j, ws[0][r], mins[0][r]);
          row_scales<T>(blk, 2 * j + 1, ws[1][r], mins[1][r]);
        } else {
          row_scales<T>(blk, j, ws[0][r], mins[0][r]);
        }
      }
      const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
      const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
      const __m256i a = _mm256_hadd_epi32(h01, h23), c = _mm256_hadd_epi32(h45, h67);
      const __m256i first = _mm256_permute2x128_si256(a, c, 0x20), second = _mm256_permute2x128_si256(a, c, 0x31);
      const float xs = x.xs[b * 4 + j];
      if constexpr (F::kG16) {
        acc = group_fma(acc, first, _mm256_load_ps(ws[0]), xs, _mm256_load_ps(mins[0]), x.term[b * 8 + 2 * j]);
        acc = group_fma(acc, second, _mm256_load_ps(ws[1]), xs, _mm256_load_ps(mins[1]), x.term[b * 8 + 2 * j + 1]);
      } else {
        acc = group_fma(acc, _mm256_add_epi32(first, second), _mm256_load_ps(ws[0]), xs, _mm256_load_ps(mins[0]),
                        x.term[b * 4 + j]);
      }
    }
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, acc);
  for (int r = 0; r < R; ++r) y[i * w.rows + r0 + r] = out[r];
}

template <DType T>
void row_major_rows(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y, int64_t r_begin,
                    int64_t r_end) {
  int64_t r = r_begin;
  for (; r + 8 <= r_end; r += 8) {
    for (int64_t i = 0; i < n; ++i) rows_block<T, 8>(w, xp, x_stride, y, r, i);
  }
  for (; r < r_end; ++r) {
    for (int64_t i = 0; i < n; ++i) rows_block<T, 1>(w, xp, x_stride, y, r, i);
  }
}

}  // namespace

DENSA_TARGET_AVX2_F16C void affine_tiles_prepare_x_avx2(const float* x, int64_t cols, DType t, uint8_t* out) {
  CHECK(is_affine_rows(t) && cols % kAffineBlock == 0) << "affine x (avx2): " << dtype_name(t) << ", cols " << cols;
  auto* q = reinterpret_cast<int8_t*>(out);
  auto* xs = reinterpret_cast<float*>(out + cols);
  float* term = xs + cols / kActQ8Block;
  activation_q8_quantize_avx2(x, cols, q, xs);
  const int64_t group = affine_group(t);
  for (int64_t g = 0; g < cols / group; ++g) {
    int32_t s = 0;  // exact in any order
    for (int64_t k = g * group; k < (g + 1) * group; ++k) s += q[k];
    term[g] = xs[g * group / kActQ8Block] * static_cast<float>(s);
  }
}

void affine_rows_avx2(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y, int64_t r_begin,
                      int64_t r_end) {
  const bool tiles = w.layout == WeightLayout::kAffineTiles16;
  CHECK(tiles || w.layout == WeightLayout::kRows) << "affine (avx2): layout";
  CHECK(!tiles || (r_begin % kAffineTileRows == 0 && r_end % kAffineTileRows == 0))
      << "affine tiles (avx2): rows " << r_begin << ".." << r_end;
  const bool known = visit_affine_dtype(w.dtype, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    if (tiles) {
      tiles_rows<T>(w, xp, x_stride, n, y, r_begin, r_end);
    } else {
      row_major_rows<T>(w, xp, x_stride, n, y, r_begin, r_end);
    }
  });
  CHECK(known) << "affine (avx2): dtype " << dtype_name(w.dtype);
}

}  // namespace densa::matmul_internal
