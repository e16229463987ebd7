#pragma once
// AVX-512 matmul for FP8 e4m3 block-scaled and INT4 group-wise weights, and BF16 / F16 weights
// on AMX tiles (W16A16, the FP8 AMX kernels with a copy or an exact split instead of the decode;
// see "BF16 on AMX" below and matmul_quant_bf16_amx).
//
// Both paths keep the weights exact and round the activations once per call, so the inner
// loop is a hardware dot-product instruction instead of a decode to fp32 (the exact fp32 path
// this replaced was bound by its decoding, well below memory bandwidth):
//  - FP8 (W8A16): x is rounded to bf16 (round to nearest even). A 128-entry table turns each
//    e4m3 code into its exact bf16 value (high and low byte by one vpermi2b each, sign bit
//    or-ed in; every e4m3 value, subnormals and NaN included, is a bf16), and vdpbf16ps
//    multiplies 32 weights by 32 activations per instruction into fp32. Each 128-column scale
//    block is summed on its own and added as fma(block_sum, scale, acc). NaN codes decode to
//    NaN and propagate like in the reference.
//  - INT4 (W4A8): x is quantized to int8 in blocks of 32 (quant/activation_q8.h). vpdpbusd
//    multiplies 64 unsigned nibbles (q + 8) by 64 int8 activations per instruction; the +8
//    offset is removed by starting each chunk's int32 sums at -8 * sum(x_q) (exact). Each
//    int32 lane holds 8 elements of one x block and one weight group and is added as
//    fma(float(sum), w_scale * x_scale, acc). The weight scales are bf16 in memory; one masked
//    word permute places each lane's scale in the high half of the lane, which is its exact
//    fp32 value. GGUF Q4_0 repacked at load keeps its f16 scales: a word permute puts lane l's
//    scale in word l and vcvtph2ps widens all 16 exactly.
//  - INT8 (W8A8; GGUF Q8_0 repacked at load, f16 scales per 32): x quantized as for INT4.
//    Per 128 columns the two 64-byte halves of codes and x are regrouped (128-bit lane j of
//    each: 16 elements of group j) and the codes flipped to unsigned (code + 128); two
//    vpdpbusd started from -128 * sum(x_q) give the exact int32 sum of w * q over each lane's
//    8 elements, added as fma(float(sum), w_scale * x_scale, acc) (lane l: group l / 4).
// Error: |y - y_exact| <= 2^-8 * sum|w x| (FP8, the bf16 unit roundoff) and sum_k |w_k| * amax(x block of k) / 254
// (INT4 and INT8), plus fp32 accumulation rounding; the twins in kernels/reference/matmul_quant_ref.h
//
// Reduction order per (i, r), fixed by this file alone: FP8: per scale block, 64-column steps
// in order, two vdpbf16ps each into one block sum, then one fma into the row accumulator;
// INT4 and INT8: per 128-column chunk, exact int32 lane sums, one fma into the row accumulator; at the
// end y = hsum(acc) with a fixed tree. Tiles over rows and x rows only interleave independent
// (i, r) chains, the activation rounding depends on the x row alone, and threads split over
//
// The kernels live in kernels/matmul/quant_*: activation preparation, the FP8, INT4 and INT8
// row kernels, INT4 8-row tiles, INT8 16-row tiles (VNNI and AMX-INT8), FP8 / BF16 / F16 on
// AMX tiles, and the dispatch behind kernels/internal/matmul_quant_avx512.h. This header holds
// what they share: the prepared layouts' sizes, the vector helpers (target attributes from
// kernels/internal/target.h, always_inline: they must fold into every kernel that uses them),
// the tile loops and the entry points the dispatch calls. Only those files include it.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/tensor_view.h"
#include "core/worker_scratch.h"
#include "kernels/internal/align.h"
#include "kernels/internal/amx_tile.h"
#include "kernels/internal/hsum_avx512.h"
#include "kernels/internal/int8t_x.h"
#include "kernels/internal/matmul_affine.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/internal/scratch_slots.h"
#include "kernels/internal/target.h"
#include "quant/activation_q8.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"
#include "quant/fp8.h"
#include "quant/int4_group.h"
#include "quant/int8_group.h"

namespace densa::matmul_internal {

using kernels_internal::kAmxTileBytes;

constexpr int64_t kPrefetchBytes = 512;  // software prefetch distance per weight row
constexpr int64_t kXBlockBytes = 256 * 1024;  // prepared x rows per GEMM block (see matmul_quant_avx512_rows)

constexpr int64_t kFp8Step = 64;          // columns per FP8 step (one 64-byte load)
constexpr int64_t kFp8StepBytes = 128;    // prepared activations per step (64 bf16)
constexpr int64_t kInt4Chunk = 128;       // columns per INT4 chunk (one 64-byte load)
constexpr int64_t kInt4ChunkBytes = 256;  // prepared activations per chunk
constexpr int64_t kInt8Step = 128;        // columns per INT8 step (two 64-byte loads)
constexpr int64_t kInt8StepBytes = 256;   // prepared activations per step

// BF16 and F16: unscaled 16-bit floats, which run on AMX tiles with x rounded to bf16
// (matmul_quant_bf16_amx).
inline bool half_float(DType t) { return t == DType::kBF16 || t == DType::kF16; }

inline int64_t fp8_x_stride(int64_t cols) { return (cols + kFp8Step - 1) / kFp8Step * kFp8StepBytes; }
inline int64_t int4_x_stride(int64_t cols) { return (cols + kInt4Chunk - 1) / kInt4Chunk * kInt4ChunkBytes; }
inline int64_t int8_x_stride(int64_t cols) { return (cols + kInt8Step - 1) / kInt8Step * kInt8StepBytes; }
// INT8 and INT4 in 16-row tiles: x as kernels/internal/int8t_x.h lays it out.
inline int64_t x_stride(const WeightView& w) {
  if (w.layout == WeightLayout::kInt8Tiles16 || w.layout == WeightLayout::kInt4Tiles16) return int8t_x_stride(w.cols);
  if (w.layout == WeightLayout::kAffineTiles16) return affine_tiles_x_stride(w.dtype, w.cols);
  if (is_affine_rows(w.dtype)) return affine_x_stride(w.cols);
  return w.dtype == DType::kFP8E4M3 ? fp8_x_stride(w.cols) : w.dtype == DType::kI8 ? int8_x_stride(w.cols) : int4_x_stride(w.cols);
}

// bf16 bytes of the e4m3 values 0x00 .. 0x7f (the sign bit is or-ed in separately).
struct Fp8Lut {
  alignas(64) uint8_t hi[128];
  alignas(64) uint8_t lo[128];
};

inline const Fp8Lut& fp8_lut() {
  static const Fp8Lut lut = [] {
    Fp8Lut t{};
    for (int c = 0; c < 128; ++c) {
      const uint16_t b = f32_to_bf16(fp8_e4m3_to_f32(static_cast<uint8_t>(c)));
      CHECK(c == kFp8E4M3NaN || bf16_to_f32(b) == fp8_e4m3_to_f32(static_cast<uint8_t>(c))) << "fp8 lut " << c;
      t.hi[c] = static_cast<uint8_t>(b >> 8);
      t.lo[c] = static_cast<uint8_t>(b & 0xff);
    }
    return t;
  }();
  return lut;
}

DENSA_TARGET_AVX512_QUANT_INLINE __mmask16 float_mask(int64_t valid) {
  return valid >= 16 ? __mmask16{0xffff} : valid <= 0 ? __mmask16{0} : static_cast<__mmask16>((1u << valid) - 1u);
}

// INT8: 128 bytes as two 64-byte vectors lo, hi (groups 0-1, 2-3 of 32) regrouped so that
// 128-bit lane j of `first` holds bytes 0-15 of group j and of `second` bytes 16-31. The
// weight codes and x go through this same permutation.
DENSA_TARGET_AVX512_QUANT_INLINE void int8_regroup(__m512i lo, __m512i hi, __m512i& first, __m512i& second) {
  first = _mm512_shuffle_i64x2(lo, hi, 0x88);
  second = _mm512_shuffle_i64x2(lo, hi, 0xdd);
}

// The fixed tree of kernels/internal/hsum_avx512.h.
DENSA_TARGET_AVX512_QUANT_INLINE float hsum(__m512 v) { return kernels_internal::hsum_avx512(v); }

DENSA_TARGET_AVX512_QUANT_INLINE __mmask64 byte_mask(int64_t valid) {
  return valid >= 64 ? ~__mmask64{0} : (__mmask64{1} << valid) - 1;
}

DENSA_TARGET_AVX512_QUANT_INLINE __mmask32 word_mask(int64_t valid) {
  return valid >= 32 ? ~__mmask32{0} : valid <= 0 ? __mmask32{0} : static_cast<__mmask32>((1u << valid) - 1u);
}

// 64 e4m3 codes -> two vectors of 32 bf16 (codes 16k + 0..7 and 16k + 8..15 of lane k).
DENSA_TARGET_AVX512_QUANT_INLINE void fp8_to_bf16(__m512i c, const __m512i lut[4], __m512i& w0, __m512i& w1) {
  __m512i hi = _mm512_permutex2var_epi8(lut[0], c, lut[1]);
  const __m512i lo = _mm512_permutex2var_epi8(lut[2], c, lut[3]);
  hi = _mm512_ternarylogic_epi32(hi, c, _mm512_set1_epi8(static_cast<char>(0x80)), 0xf8);  // hi | (c & 0x80)
  w0 = _mm512_unpacklo_epi8(lo, hi);
  w1 = _mm512_unpackhi_epi8(lo, hi);
}

DENSA_TARGET_AVX512_QUANT_INLINE __m512 dot_bf16(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(a), reinterpret_cast<__m512bh&>(b));
}

struct Args {
  const WeightView* w;
  const uint8_t* xp;  // prepared activations
  int64_t x_stride;   // bytes per prepared x row
  float* y;
  // FP8 GEMM: the tile's rows already decoded to bf16 (per row, per 64-column step: w0, w1 as
  // fp8_to_bf16 gives them), so a row tile is decoded once for all x rows instead of once per
  // x tile. The products are the same instructions on the same values.
  const uint8_t* pre = nullptr;
  int64_t pre_row_stride = 0;  // bytes per decoded row
};

// Every tile kernel starts its accumulators here ...
template <int R, int NX>
DENSA_TARGET_AVX512_QUANT_INLINE void zero_tile(__m512 (&acc)[R][NX]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) acc[r][i] = _mm512_setzero_ps();
  }
}

// ... and ends here: y[i0 + i, r0 + r] = hsum(acc[r][i]) (the fixed reduction tree).
template <int R, int NX>
DENSA_TARGET_AVX512_QUANT_INLINE void store_tile(const Args& a, int64_t r0, int64_t i0, const __m512 (&acc)[R][NX]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) a.y[(i0 + i) * a.w->rows + r0 + r] = hsum(acc[r][i]);
  }
}

// The tile loops of the row kernels: Tile::run<R, NX>(a, r0, i0) computes the outputs of weight
// rows [r0, r0 + R) for x rows [i0, i0 + NX). x_tiles covers x rows [i0, n) with tiles of NX
// rows, then the rest with fewer; row_tiles covers weight rows [r_begin, r_end) with tiles of R
// rows, then single rows. Tiles only interleave independent (i, r) chains.
template <class Tile, int R, int NX>
DENSA_TARGET_AVX512_QUANT void x_tiles(const Args& a, int64_t r0, int64_t i0, int64_t n) {
  for (; i0 + NX <= n; i0 += NX) Tile::template run<R, NX>(a, r0, i0);
  if constexpr (NX > 1) {
    if (i0 < n) x_tiles<Tile, R, NX - 1>(a, r0, i0, n);
  }
}

template <class Tile, int R, int NX>
DENSA_TARGET_AVX512_QUANT void row_tiles(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  int64_t r = r_begin;
  for (; r + R <= r_end; r += R) x_tiles<Tile, R, NX>(a, r, 0, n);
  for (; r < r_end; ++r) x_tiles<Tile, 1, NX>(a, r, 0, n);
}

// The prepared x of a matrix on AMX tiles (quant_amx_fp8_bf16.cpp): B tiles of 16 tokens (1 in
// decode) per 32 columns.
inline int64_t amx_tokens_per_tile(int64_t n) { return n == 1 ? 1 : 16; }
inline int64_t amx_ksteps(int64_t cols) { return (cols + kFp8Step - 1) / kFp8Step * 2; }  // always even
inline int64_t amx_x_tiles_bytes(int64_t cols, int64_t n) {
  const int64_t per_tile = amx_tokens_per_tile(n);
  return (n + per_tile - 1) / per_tile * amx_ksteps(cols) * 64 * per_tile;
}
// The columns the tile kernels see: an F16 row of `cols` is a bf16 row of twice as many, each
// 64-column step once as its bf16 high parts and once as the remainders (amx_f16_row), and x
// is repeated to match (prepare_x_amx).
inline int64_t amx_cols(const WeightView& w) {
  return w.dtype == DType::kF16 ? 2 * ((w.cols + kFp8Step - 1) / kFp8Step * kFp8Step) : w.cols;
}
inline int64_t amx_x_bytes(const WeightView& w, int64_t n) { return amx_x_tiles_bytes(amx_cols(w), n); }

// The one fp32 step the INT8 and INT4 16-row tile kernels end a group with, on VNNI and AMX
// alike (so they give the same bits as ref::matmul_int8_groups_fp32): acc += float(sum) *
// (w_scale * x_scale), the product rounded first, one fma. |sum| < 2^24, so float(sum) is exact.
DENSA_TARGET_AVX512_QUANT_INLINE __m512 tiles16_group_fma(__m512 acc, __m512i sum, __m512 w_scales, float x_scale) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(w_scales, _mm512_set1_ps(x_scale)), acc);
}

// 16 row scales of a tile group (f16, or bf16 for INT4 checkpoints) as fp32 (exact).
template <bool kF16>
DENSA_TARGET_AVX512_QUANT_INLINE __m512 tiles16_load_scales(const uint8_t* scales) {
  const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(scales));
  if constexpr (kF16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// The entry points rows() dispatches to: outputs of weight rows [r_begin, r_end) for the n x
// rows of a.xp, per format and layout.
// FP8 block-scaled rows (quant_fp8_rows_avx512.cpp): 8-row tiles for n = 1, else the GEMM.
void fp8_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end, WorkerScratch& ws);
// INT4 group-wise rows, bf16 or f16 scales (quant_int4_rows_avx512.cpp).
void int4_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end);
// INT8 (GGUF Q8_0 repacked) rows (quant_int8_rows_avx512.cpp).
void int8_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end);
// INT4 g32 in 8-row tiles, whole tiles (quant_int4_tiles_avx512.cpp).
void int4_tiles_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end);
// INT8 in 16-row tiles, whole tiles (quant_int8_tiles_avx512.cpp).
DENSA_TARGET_AVX512_QUANT void int8_tiles_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end);
// INT4 g32 in 16-row tiles, whole tiles (quant_int4_tiles16_avx512.cpp); x prepared as for INT8
// tiles (prepare_x_int8t).
DENSA_TARGET_AVX512_QUANT void int4_tiles16_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end);
// FP8, BF16 and F16 on AMX tiles (quant_amx_fp8_bf16.cpp); xp as prepare_x_amx_rows wrote it.
void amx_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin, int64_t r_end,
              WorkerScratch& ws);
// Whether w runs on AMX tiles: FP8 where matmul_quant_fp8_amx(w.amx), BF16 / F16 where
// matmul_quant_bf16_amx(w.amx) (quant_dispatch_avx512.cpp).
bool quant_on_amx(const WeightView& w);

}  // namespace densa::matmul_internal
