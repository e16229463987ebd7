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
// compute the same products from the same rounded activations in double.
//
// Layout of the prepared activations (one buffer per call, row-major over x rows):
//  - FP8: per 64 elements, two vectors of 32 bf16 in the order the in-lane byte unpacks
//    produce the weights: word j of the first is element 16 (j / 8) + j % 8, of the second
//    that + 8.
//  - INT4: per 128 elements (64 bytes of nibbles; byte b holds elements 2b, 2b+1): 64 int8 of
//    the even elements, 64 of the odd ones, 16 fp32 x scales (lane l covers elements
//    8l .. 8l+7, x block l / 4) and 16 int32 of -8 * the lane's sum of x_q.
//
//  - INT8: per 128 elements, 64 int8 of q with 128-bit lane j holding elements 0-15 of x
//    block j, 64 with elements 16-31, 16 fp32 x scales (lane l: x block l / 4) and 16 int32 of
//    -128 * the lane's sum of q over both.
//
// Reduction order per (i, r), fixed by this file alone: FP8: per scale block, 64-column steps
// in order, two vdpbf16ps each into one block sum, then one fma into the row accumulator;
// INT4 and INT8: per 128-column chunk, exact int32 lane sums, one fma into the row accumulator; at the
// end y = hsum(acc) with a fixed tree. Tiles over rows and x rows only interleave independent
// (i, r) chains, the activation rounding depends on the x row alone, and threads split over
// rows only, so y[i, r] does not depend on n, the other rows of x, or the thread count.
// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/matmul_quant_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/internal/align.h"
#include "kernels/internal/matmul_affine.h"
#include "kernels/internal/amx_tile.h"
#include "kernels/internal/hsum_avx512.h"
#include "quant/activation_q8.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"
#include "quant/fp8.h"
#include "quant/int4_group.h"
#include "quant/int8_group.h"

#define DENSA_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,avx512vbmi,fma,f16c")))
#define DENSA_AVX512_INLINE DENSA_AVX512 __attribute__((always_inline)) inline
#define DENSA_AVX512_GFNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,avx512vbmi,fma,f16c,gfni")))
#define DENSA_AVX512_GFNI_INLINE DENSA_AVX512_GFNI __attribute__((always_inline)) inline
#define DENSA_AMX \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,avx512vbmi,fma,f16c,amx-tile,amx-bf16")))
#define DENSA_AMX_INLINE DENSA_AMX __attribute__((always_inline)) inline
#define DENSA_AMX_INT8 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,avx512vbmi,fma,f16c,amx-tile,amx-int8")))

namespace densa::matmul_internal {
namespace {

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
bool half_float(DType t) { return t == DType::kBF16 || t == DType::kF16; }

int64_t fp8_x_stride(int64_t cols) { return (cols + kFp8Step - 1) / kFp8Step * kFp8StepBytes; }
int64_t int4_x_stride(int64_t cols) { return (cols + kInt4Chunk - 1) / kInt4Chunk * kInt4ChunkBytes; }
int64_t int8_x_stride(int64_t cols) { return (cols + kInt8Step - 1) / kInt8Step * kInt8StepBytes; }
// INT8 in 16-row tiles: a prepared x row is cols int8 q, then per group its fp32 x scale, then
// per group 128 * the group's sum of q (the start of the sums against the code + 128 weights).
int64_t int8t_x_stride(int64_t cols) { return (cols + 8 * (cols / 32) + 63) / 64 * 64; }
int64_t x_stride(const WeightView& w) {
  if (w.layout == WeightLayout::kInt8Tiles16) return int8t_x_stride(w.cols);
  if (w.layout == WeightLayout::kAffineTiles16) return affine_tiles_x_stride(w.dtype, w.cols);
  if (is_affine_rows(w.dtype)) return affine_x_stride(w.cols);
  return w.dtype == DType::kFP8E4M3 ? fp8_x_stride(w.cols) : w.dtype == DType::kI8 ? int8_x_stride(w.cols) : int4_x_stride(w.cols);
}

// bf16 bytes of the e4m3 values 0x00 .. 0x7f (the sign bit is or-ed in separately).
struct Fp8Lut {
  alignas(64) uint8_t hi[128];
  alignas(64) uint8_t lo[128];
};

const Fp8Lut& fp8_lut() {
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

DENSA_AVX512_INLINE __mmask16 float_mask(int64_t valid) {
  return valid >= 16 ? __mmask16{0xffff} : valid <= 0 ? __mmask16{0} : static_cast<__mmask16>((1u << valid) - 1u);
}

// bf16(x) (round to nearest even, as f32_to_bf16) in the per-64 order described at the top.
DENSA_AVX512 void prepare_x_fp8(const float* x, int64_t cols, uint8_t* out) {
  alignas(64) int16_t idx0[32], idx1[32];
  for (int j = 0; j < 32; ++j) {
    idx0[j] = static_cast<int16_t>(16 * (j / 8) + j % 8);
    idx1[j] = static_cast<int16_t>(idx0[j] + 8);
  }
  const __m512i i0 = _mm512_load_si512(idx0), i1 = _mm512_load_si512(idx1);
  for (int64_t k0 = 0; k0 < cols; k0 += kFp8Step, out += kFp8StepBytes) {
    __m512 v[4];
    for (int q = 0; q < 4; ++q) v[q] = _mm512_maskz_loadu_ps(float_mask(cols - k0 - 16 * q), x + k0 + 16 * q);
    // Words 0..31 = elements 0..31, words 32..63 = elements 32..63.
    const __m512bh a = _mm512_cvtne2ps_pbh(v[1], v[0]);
    const __m512bh b = _mm512_cvtne2ps_pbh(v[3], v[2]);
    const __m512i ai = reinterpret_cast<const __m512i&>(a), bi = reinterpret_cast<const __m512i&>(b);
    _mm512_storeu_si512(out, _mm512_permutex2var_epi16(ai, i0, bi));
    _mm512_storeu_si512(out + 64, _mm512_permutex2var_epi16(ai, i1, bi));
  }
}

// activation_q8_quantize (same fp32 operations, so the same q and scales) of the 128
// elements from k0 (zeros past cols): q[128] and the four block scales sx[4].
DENSA_AVX512_INLINE void quantize_x128(const float* x, int64_t cols, int64_t k0, int8_t* q, float* sx) {
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  for (int b = 0; b < 4; ++b) {
    __m512 v[2];
    __mmask16 bad = 0;
    __m512 amax = _mm512_setzero_ps();
    for (int h = 0; h < 2; ++h) {
      const int64_t at = k0 + 32 * b + 16 * h;
      v[h] = _mm512_maskz_loadu_ps(float_mask(cols - at), x + at);
      const __m512 av = _mm512_abs_ps(v[h]);
      bad |= _mm512_cmp_ps_mask(av, inf, _CMP_NLT_UQ);  // inf or NaN
      amax = _mm512_max_ps(amax, av);
    }
    const float m = _mm512_reduce_max_ps(amax);
    if (bad != 0 || m == 0.0f) {
      sx[b] = bad != 0 ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
      std::memset(q + 32 * b, 0, 32);
      continue;
    }
    const __m512 inv = _mm512_set1_ps(127.0f / m);
    sx[b] = m / 127.0f;
    for (int h = 0; h < 2; ++h) {
      __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(v[h], inv));  // MXCSR default: half to even
      qi = _mm512_max_epi32(_mm512_min_epi32(qi, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
      _mm_store_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16 * h), _mm512_cvtepi32_epi8(qi));
    }
  }
}

// The 256 bytes of one prepared INT4 or INT8 step: the int8 vectors a and b (32-bit lane l of
// each holds elements of x block l / 4 only), lane l's x scale, and `offset` (the weight codes'
// unsigned offset, negated) times the lane's sum of q over a and b: the start of its int32 sums.
DENSA_AVX512_INLINE void store_x_step(uint8_t* out, __m512i a, __m512i b, const float* sx, int32_t offset) {
  const __m512i lane_block = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i lane_sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, a), ones, b);
  _mm512_storeu_si512(out, a);
  _mm512_storeu_si512(out + 64, b);
  _mm512_storeu_ps(out + 128, _mm512_permutexvar_ps(lane_block, _mm512_castps128_ps512(_mm_loadu_ps(sx))));
  _mm512_storeu_si512(out + 192, _mm512_mullo_epi32(lane_sum, _mm512_set1_epi32(offset)));
}

// INT8: 128 bytes as two 64-byte vectors lo, hi (groups 0-1, 2-3 of 32) regrouped so that
// 128-bit lane j of `first` holds bytes 0-15 of group j and of `second` bytes 16-31. The
// weight codes and x go through this same permutation.
DENSA_AVX512_INLINE void int8_regroup(__m512i lo, __m512i hi, __m512i& first, __m512i& second) {
  first = _mm512_shuffle_i64x2(lo, hi, 0x88);
  second = _mm512_shuffle_i64x2(lo, hi, 0xdd);
}

// quantize_x128 in the per-128 layout described at the top.
DENSA_AVX512 void prepare_x_int4(const float* x, int64_t cols, uint8_t* out) {
  alignas(64) uint8_t even_idx[64], odd_idx[64];
  for (int j = 0; j < 64; ++j) {
    even_idx[j] = static_cast<uint8_t>(2 * j);
    odd_idx[j] = static_cast<uint8_t>(2 * j + 1);
  }
  const __m512i ie = _mm512_load_si512(even_idx), io = _mm512_load_si512(odd_idx);
  for (int64_t k0 = 0; k0 < cols; k0 += kInt4Chunk, out += kInt4ChunkBytes) {
    alignas(64) int8_t q[kInt4Chunk];
    alignas(16) float sx[4];
    quantize_x128(x, cols, k0, q, sx);
    const __m512i q0 = _mm512_load_si512(q), q1 = _mm512_load_si512(q + 64);
    store_x_step(out, _mm512_permutex2var_epi8(q0, ie, q1), _mm512_permutex2var_epi8(q0, io, q1), sx, -8);
  }
}

// quantize_x128 in the per-128 INT8 layout described at the top: the two 64-byte halves
// regrouped so that 128-bit lane j of each holds 16 elements of x block j, the lanes' x
// scales, and -128 * each lane's sum of q (the start of its int32 sums).
DENSA_AVX512 void prepare_x_int8(const float* x, int64_t cols, uint8_t* out) {
  for (int64_t k0 = 0; k0 < cols; k0 += kInt8Step, out += kInt8StepBytes) {
    alignas(64) int8_t q[kInt8Step];
    alignas(16) float sx[4];
    quantize_x128(x, cols, k0, q, sx);
    __m512i first, second;
    int8_regroup(_mm512_load_si512(q), _mm512_load_si512(q + 64), first, second);
    store_x_step(out, first, second, sx, -128);
  }
}

// quantize_x128 (the same q and scales as every other W8A8 / W4A8 path) in the 16-row tile
// layout's order (int8t_x_stride). cols % 128 == 0 (int8_group_tileable).
DENSA_AVX512 void prepare_x_int8t(const float* x, int64_t cols, uint8_t* out) {
  const int64_t groups = cols / 32;
  auto* q = reinterpret_cast<int8_t*>(out);
  auto* sx = reinterpret_cast<float*>(out + cols);
  auto* corr = reinterpret_cast<int32_t*>(out + cols + 4 * groups);
  activation_q8_quantize_avx512(x, cols, q, sx);
  for (int64_t g = 0; g < groups; ++g) {
    int32_t sum = 0;
    for (int64_t k = 0; k < 32; ++k) sum += q[g * 32 + k];
    corr[g] = 128 * sum;
  }
}

// The fixed tree of kernels/internal/hsum_avx512.h.
DENSA_AVX512_INLINE float hsum(__m512 v) { return kernels_internal::hsum_avx512(v); }

DENSA_AVX512_INLINE __mmask64 byte_mask(int64_t valid) {
  return valid >= 64 ? ~__mmask64{0} : (__mmask64{1} << valid) - 1;
}

DENSA_AVX512_INLINE __mmask32 word_mask(int64_t valid) {
  return valid >= 32 ? ~__mmask32{0} : valid <= 0 ? __mmask32{0} : static_cast<__mmask32>((1u << valid) - 1u);
}

// 64 e4m3 codes -> two vectors of 32 bf16 (codes 16k + 0..7 and 16k + 8..15 of lane k).
DENSA_AVX512_INLINE void fp8_to_bf16(__m512i c, const __m512i lut[4], __m512i& w0, __m512i& w1) {
  __m512i hi = _mm512_permutex2var_epi8(lut[0], c, lut[1]);
  const __m512i lo = _mm512_permutex2var_epi8(lut[2], c, lut[3]);
  hi = _mm512_ternarylogic_epi32(hi, c, _mm512_set1_epi8(static_cast<char>(0x80)), 0xf8);  // hi | (c & 0x80)
  w0 = _mm512_unpacklo_epi8(lo, hi);
  w1 = _mm512_unpackhi_epi8(lo, hi);
}

DENSA_AVX512_INLINE __m512 dot_bf16(__m512 acc, __m512i a, __m512i b) {
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
DENSA_AVX512_INLINE void zero_tile(__m512 (&acc)[R][NX]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) acc[r][i] = _mm512_setzero_ps();
  }
}

// ... and ends here: y[i0 + i, r0 + r] = hsum(acc[r][i]) (the fixed reduction tree).
template <int R, int NX>
DENSA_AVX512_INLINE void store_tile(const Args& a, int64_t r0, int64_t i0, const __m512 (&acc)[R][NX]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) a.y[(i0 + i) * a.w->rows + r0 + r] = hsum(acc[r][i]);
  }
}

template <int R, int NX, bool kPre = false>
DENSA_AVX512_INLINE void fp8_tile(const Args& a, int64_t r0, int64_t i0) {
  const WeightView& w = *a.w;
  const int64_t cols = w.cols, sc = w.scale_cols;
  const int64_t scols = (cols + sc - 1) / sc;
  const Fp8Lut& t = fp8_lut();
  const __m512i lut[4] = {_mm512_load_si512(t.hi), _mm512_load_si512(t.hi + 64), _mm512_load_si512(t.lo),
                          _mm512_load_si512(t.lo + 64)};
  const uint8_t* rp[R];
  const float* sp[R];
  for (int r = 0; r < R; ++r) {
    rp[r] = w.row_ptr(r0 + r);
    sp[r] = w.scales_f32 + ((r0 + r) / w.scale_rows) * scols;
  }
  const int64_t next_tile = R * w.row_bytes();  // the same spot in the next row tile
  __m512 acc[R][NX];
  zero_tile<R, NX>(acc);
  for (int64_t k0 = 0, blk = 0; k0 < cols; k0 += sc, ++blk) {
    const int64_t kend = std::min(cols, k0 + sc);
    __m512 bacc[R][NX];
    zero_tile<R, NX>(bacc);
    for (int64_t k = k0; k < kend; k += kFp8Step) {
      const __mmask64 m = byte_mask(kend - k);
      __m512i x0[NX], x1[NX];
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const uint8_t* xs = a.xp + (i0 + i) * a.x_stride + k / kFp8Step * kFp8StepBytes;
        x0[i] = _mm512_loadu_si512(xs);
        x1[i] = _mm512_loadu_si512(xs + 64);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m512i w0, w1;
        if constexpr (kPre) {
          const uint8_t* wp = a.pre + r * a.pre_row_stride + k / kFp8Step * kFp8StepBytes;
          w0 = _mm512_load_si512(wp);
          w1 = _mm512_load_si512(wp + 64);
        } else {
          _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k + kPrefetchBytes), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k + next_tile), _MM_HINT_T1);
          fp8_to_bf16(_mm512_maskz_loadu_epi8(m, rp[r] + k), lut, w0, w1);
        }
#pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          bacc[r][i] = dot_bf16(bacc[r][i], w0, x0[i]);
          bacc[r][i] = dot_bf16(bacc[r][i], w1, x1[i]);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(sp[r][blk]);
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) acc[r][i] = _mm512_fmadd_ps(bacc[r][i], s, acc[r][i]);
    }
  }
  store_tile<R, NX>(a, r0, i0, acc);
}

// kF16: the group scales are f16 (GGUF Q4_0 repacked), else bf16.
template <int R, int NX, bool kF16>
DENSA_AVX512_INLINE void int4_tile(const Args& a, int64_t r0, int64_t i0) {
  const WeightView& w = *a.w;
  const int64_t cols = w.cols, g = w.scale_cols;
  const int64_t groups = cols / g;
  const uint8_t* rp[R];
  const uint16_t* sp[R];  // bf16 or f16 scales
  for (int r = 0; r < R; ++r) {
    rp[r] = w.row_ptr(r0 + r);
    sp[r] = (kF16 ? w.scales_f16 : w.scales_bf16) + (r0 + r) * groups;
  }
  const int64_t next_tile = R * w.row_bytes();  // the same spot in the next row tile
  const int64_t next_tile_scales = R * groups;
  // Lane l of a chunk covers elements 8l .. 8l+7: weight group (128 c + 8 l) / g. bf16: word
  // 2l + 1 of lane_group picks that group's scale (the lane's high half), word 2l is zeroed.
  // f16: word l of lane_group_f16 picks it, and vcvtph2ps widens the 16 words to fp32 (exact).
  const bool small_groups = g < kInt4Chunk;
  __m512i lane_group = _mm512_setzero_si512();
  __m256i lane_group_f16 = _mm256_setzero_si256();
  if (small_groups) {
    alignas(64) int16_t idx[32];
    for (int l = 0; l < 16; ++l) {
      idx[2 * l] = 0;
      idx[2 * l + 1] = static_cast<int16_t>(8 * l / g);
    }
    lane_group = _mm512_load_si512(idx);
    for (int l = 0; l < 16; ++l) idx[l] = static_cast<int16_t>(8 * l / g);
    lane_group_f16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
  }
  constexpr __mmask32 kHighWords = 0xaaaaaaaau;
  const __m512i nib = _mm512_set1_epi8(0x0f);
  __m512 acc[R][NX];
  zero_tile<R, NX>(acc);
  // Scale index of the chunk's first element, kept without a division in the loop:
  // g < 128 advances 128 / g groups per chunk, g >= 128 one group every g / 128 chunks.
  const int64_t groups_per_chunk = small_groups ? kInt4Chunk / g : 0;
  const int64_t chunks_per_group = small_groups ? 1 : g / kInt4Chunk;
  int64_t sidx = 0, chunk_in_group = 0;
  for (int64_t k = 0; k < cols; k += kInt4Chunk) {
    const bool tail = cols - k < kInt4Chunk;
    const __mmask64 m = tail ? byte_mask((cols - k) / 2) : ~__mmask64{0};
    // Scales this chunk covers (g < 128 only): exactly those are loaded, so the load never
    // reaches past the row's scales (they may end a mapped checkpoint file).
    const __mmask32 gm = static_cast<__mmask32>((1u << (tail ? (cols - k) / g : groups_per_chunk)) - 1u);
    const uint8_t* xs[NX];
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) xs[i] = a.xp + (i0 + i) * a.x_stride + k / kInt4Chunk * kInt4ChunkBytes;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      // Eight short row streams defeat the hardware prefetcher: ask for each row's data
      // kPrefetchBytes ahead (past a row's end that is the next row, read next anyway).
      // GEMV only: a GEMM reads the same row tile once per x tile, from cache.
      if constexpr (NX == 1) {
        _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k / 2 + kPrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k / 2 + next_tile), _MM_HINT_T1);
        if (small_groups) {  // g32 / g64: the scales are another 8 short streams (1/16 - 1/8 of the bytes)
          _mm_prefetch(reinterpret_cast<const char*>(sp[r] + sidx + kPrefetchBytes / 2), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(sp[r] + sidx + next_tile_scales), _MM_HINT_T1);
        }
      }
      const __m512i v = _mm512_maskz_loadu_epi8(m, rp[r] + k / 2);
      const __m512i lo = _mm512_and_si512(v, nib);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
      __m512 ws;
      if constexpr (kF16) {
        ws = small_groups ? _mm512_cvtph_ps(_mm256_permutexvar_epi16(lane_group_f16,
                                                                     _mm256_maskz_loadu_epi16(gm, sp[r] + sidx)))
                          : _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(sp[r][sidx])));
      } else {
        ws = small_groups
                 ? _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(kHighWords, lane_group,
                                                                      _mm512_maskz_loadu_epi16(gm, sp[r] + sidx)))
                 : _mm512_castsi512_ps(_mm512_maskz_set1_epi16(kHighWords, static_cast<short>(sp[r][sidx])));
      }
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        __m512i s = _mm512_loadu_si512(xs[i] + 192);
        s = _mm512_dpbusd_epi32(s, lo, _mm512_loadu_si512(xs[i]));
        s = _mm512_dpbusd_epi32(s, hi, _mm512_loadu_si512(xs[i] + 64));
        const __m512 scale = _mm512_mul_ps(ws, _mm512_loadu_ps(reinterpret_cast<const float*>(xs[i] + 128)));
        acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[r][i]);
      }
    }
    if (small_groups) {
      sidx += groups_per_chunk;
    } else if (++chunk_in_group == chunks_per_group) {
      chunk_in_group = 0;
      ++sidx;
    }
  }
  store_tile<R, NX>(a, r0, i0, acc);
}

// INT8 (W8A8): per 128-column step, the row's two 64-byte loads regrouped as x was
// (vshufi64x2: 128-bit lane j of each holds 16 codes of group j) and flipped to unsigned
// (code + 128, one xor); two vpdpbusd with x, started from -128 * sum(x_q), give the exact
// int32 sum of w * q over each lane's 8 elements, all of group l / 4. Scales: the step's four
// f16 weight scales widened by vcvtph2ps and spread by a lane permute, times the prepared
// per-lane x scales. Per row and x row a step costs two vpdpbusd, a multiply, a conversion
// and an fma (the per-64 form this replaced: a vpdpbusd, a subtraction, a multiply, a
// conversion and an fma per 64 columns).
template <int R, int NX>
DENSA_AVX512_INLINE void int8_tile(const Args& a, int64_t r0, int64_t i0) {
  const WeightView& w = *a.w;
  const int64_t cols = w.cols, groups = cols / kActQ8Block;
  const uint8_t* rp[R];
  const uint16_t* sp[R];
  for (int r = 0; r < R; ++r) {
    rp[r] = w.row_ptr(r0 + r);
    sp[r] = w.scales_f16 + (r0 + r) * groups;
  }
  const int64_t next_tile = R * w.row_bytes();
  alignas(64) int32_t idx[16];
  for (int l = 0; l < 16; ++l) idx[l] = l / 4;
  const __m512i lane_group = _mm512_load_si512(idx);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[R][NX];
  zero_tile<R, NX>(acc);
  for (int64_t k = 0; k < cols; k += kInt8Step) {
    const int64_t left = cols - k;  // a multiple of 32: whole groups
    const __mmask64 m0 = byte_mask(left);
    const __mmask64 m1 = left > 64 ? byte_mask(left - 64) : __mmask64{0};
    // Exactly the scales this step covers: never past the row's.
    const __mmask8 gm = static_cast<__mmask8>((1u << std::min<int64_t>(4, left / kActQ8Block)) - 1u);
    const uint8_t* xs[NX];
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) xs[i] = a.xp + (i0 + i) * a.x_stride + k / kInt8Step * kInt8StepBytes;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      if constexpr (NX == 1) {
        _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k + kPrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k + kPrefetchBytes + 64), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k + next_tile), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(rp[r] + k + next_tile + 64), _MM_HINT_T1);
      }
      const __m512i v0 = _mm512_maskz_loadu_epi8(m0, rp[r] + k);
      const __m512i v1 = _mm512_maskz_loadu_epi8(m1, rp[r] + k + 64);
      // Codes past the row end load as 0 and become 128 here; x is 0 there.
      __m512i wa, wb;
      int8_regroup(v0, v1, wa, wb);
      wa = _mm512_xor_si512(wa, flip);
      wb = _mm512_xor_si512(wb, flip);
      const __m512 ws = _mm512_permutexvar_ps(
          lane_group, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_maskz_loadu_epi16(gm, sp[r] + k / kActQ8Block))));
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        __m512i s = _mm512_loadu_si512(xs[i] + 192);
        s = _mm512_dpbusd_epi32(s, wa, _mm512_loadu_si512(xs[i]));
        s = _mm512_dpbusd_epi32(s, wb, _mm512_loadu_si512(xs[i] + 64));
        const __m512 scale = _mm512_mul_ps(ws, _mm512_loadu_ps(reinterpret_cast<const float*>(xs[i] + 128)));
        acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[r][i]);
      }
    }
  }
  store_tile<R, NX>(a, r0, i0, acc);
}

// Which tile kernel: FP8 block-scaled, INT4 with bf16 or f16 group scales, or INT8 (f16 scales).
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
DENSA_AVX512_GFNI_INLINE __m512 widen_scales(__m256i h) {
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
DENSA_AVX512_GFNI_INLINE void int4_tiles_tile(const Args& a, int64_t r0, int64_t i0) {
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
DENSA_AVX512_GFNI void int4_tiles_x(const Args& a, int64_t r0, int64_t i0, int64_t n) {
  for (; i0 + NX <= n; i0 += NX) int4_tiles_tile<R, NX, kF16>(a, r0, i0);
  if constexpr (NX > 1) {
    if (i0 < n) int4_tiles_x<R, NX - 1, kF16>(a, r0, i0, n);
  }
}

// Rows [r_begin, r_end) of a tiled view: whole tiles (the matmul split keeps 8-row multiples).
template <bool kF16>
void int4_tiles_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  CHECK(r_begin % kInt4TileRows == 0 && r_end % kInt4TileRows == 0)
      << "matmul int4 tiles: rows " << r_begin << ".." << r_end << " split a tile";
  if (n == 1) {
    for (int64_t r = r_begin; r < r_end; r += 8) int4_tiles_x<8, 1, kF16>(a, r, 0, n);
  } else {
    for (int64_t r = r_begin; r < r_end; r += 4) int4_tiles_x<4, 3, kF16>(a, r, 0, n);
  }
}

enum class Fmt { kFp8, kInt4Bf16, kInt4F16, kInt8 };

template <Fmt F, int R, int NX>
DENSA_AVX512_INLINE void tile(const Args& a, int64_t r0, int64_t i0) {
  if constexpr (F == Fmt::kFp8) {
    fp8_tile<R, NX>(a, r0, i0);
  } else if constexpr (F == Fmt::kInt8) {
    int8_tile<R, NX>(a, r0, i0);
  } else {
    int4_tile<R, NX, F == Fmt::kInt4F16>(a, r0, i0);
  }
}

template <Fmt F, int R, int NX>
DENSA_AVX512 void x_tiles(const Args& a, int64_t r0, int64_t i0, int64_t n) {
  for (; i0 + NX <= n; i0 += NX) tile<F, R, NX>(a, r0, i0);
  if constexpr (NX > 1) {
    if (i0 < n) x_tiles<F, R, NX - 1>(a, r0, i0, n);
  }
}

template <Fmt F, int R, int NX>
DENSA_AVX512 void row_tiles(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  int64_t r = r_begin;
  for (; r + R <= r_end; r += R) x_tiles<F, R, NX>(a, r, 0, n);
  for (; r < r_end; ++r) x_tiles<F, 1, NX>(a, r, 0, n);
}

// Decode (n = 1): 8 weight rows per pass. Prefill: 4 rows x 2 (FP8: a block sum and an
// accumulator per pair) or 4 x 3 (INT4) x rows, each decoded weight vector used per x row.
template <int R, int NX>
DENSA_AVX512 void fp8_x_tiles_pre(const Args& a, int64_t r0, int64_t i0, int64_t n) {
  for (; i0 + NX <= n; i0 += NX) fp8_tile<R, NX, true>(a, r0, i0);
  if constexpr (NX > 1) {
    if (i0 < n) fp8_x_tiles_pre<R, NX - 1>(a, r0, i0, n);
  }
}

// FP8 GEMM: decode each 4-row tile to bf16 once (into a per-thread buffer that stays in L1/L2),
// then run every x tile over it.
DENSA_AVX512 void fp8_gemm_rows(const Args& a0, int64_t n, int64_t r_begin, int64_t r_end) {
  constexpr int R = 4;
  const WeightView& w = *a0.w;
  const int64_t steps = (w.cols + kFp8Step - 1) / kFp8Step;
  thread_local std::vector<uint8_t> storage;
  storage.resize(static_cast<size_t>(R * steps * kFp8StepBytes + 64));
  uint8_t* buf = kernels_internal::align64(storage.data());
  Args a = a0;
  a.pre = buf;
  a.pre_row_stride = steps * kFp8StepBytes;
  const Fp8Lut& t = fp8_lut();
  const __m512i lut[4] = {_mm512_load_si512(t.hi), _mm512_load_si512(t.hi + 64), _mm512_load_si512(t.lo),
                          _mm512_load_si512(t.lo + 64)};
  for (int64_t r0 = r_begin; r0 < r_end; r0 += R) {
    const int rows_here = static_cast<int>(std::min<int64_t>(R, r_end - r0));
    for (int r = 0; r < rows_here; ++r) {
      const uint8_t* rp = w.row_ptr(r0 + r);
      uint8_t* out = buf + r * a.pre_row_stride;
      // Scale blocks are multiples of 64 columns, so only the last step is partial (as in fp8_tile).
      for (int64_t s = 0; s < steps; ++s) {
        __m512i w0, w1;
        fp8_to_bf16(_mm512_maskz_loadu_epi8(byte_mask(w.cols - s * kFp8Step), rp + s * kFp8Step), lut, w0, w1);
        _mm512_store_si512(out + s * kFp8StepBytes, w0);
        _mm512_store_si512(out + s * kFp8StepBytes + 64, w1);
      }
    }
    if (rows_here == R) {
      fp8_x_tiles_pre<R, 2>(a, r0, 0, n);
    } else {
      for (int r = 0; r < rows_here; ++r) {
        Args one = a;
        one.pre = a.pre + r * a.pre_row_stride;
        fp8_x_tiles_pre<1, 2>(one, r0 + r, 0, n);
      }
    }
  }
}

// ---- FP8 on AMX tiles (CPUs with AMX-BF16, cpu_use_amx()) ----
//
// W8A16 by tdpbf16ps, with the block scale folded into the weights: each weight becomes
// bf16(value * scale) (the fp32 product rounded to nearest even, as dequantize_row then
// f32_to_bf16 give it), x becomes bf16(x) in the per-64 unpack order of prepare_x_fp8, and one
// C tile sums a row's products over all K. Folding costs nothing in the decode (a 128-entry
// table of bf16(value * scale) per scale block, used by the same two vpermi2b as fp8_to_bf16)
// and leaves no per-block fixup between tile chains (per-block sums with an fp32 fma each, as
// the vdpbf16ps path does, held the GEMV at ~7 GB/s: every block ended a tile chain).
//  - A tile = 16 weight rows x 32 of their columns (64 bytes of bf16 per row), decoded into a
//    per-thread buffer of 32 row-major bf16 rows (a tile loads 16 of them at the row stride).
//  - B tile = the same 32 columns of x for N tokens in the VNNI layout tdpbf16ps reads: row p
//    holds, per token, the bf16 pair (2p, 2p+1) of that K-step (prepare_x_amx_rows).
//  - C tile = 16 rows x N tokens, fp32: C[r][i] = y[i, r] (the transpose of y).
// Per (i, r) the order is fixed by this code alone: K-steps in order on one C tile from zero,
// the tile unit's own summation inside each tdpbf16ps. C[r][i] depends only on weight row r and
// x row i, so the tiling (row tiles, token tiles, x blocks), n and the thread split change no
// bit. N is 1 for n = 1 (decode) and 16 otherwise (tails padded with zero tokens); tests check
// that both give the same bits. Error: |y - y_exact| <= (2^-8 + 2^-18) * sum|w x| plus the
// sums' fp32 rounding (two bf16 roundings per product); twin ref::matmul_fp8_scaled_x_bf16.
// The bits differ from the vdpbf16ps path, so one process uses one of the two for every n
// (matmul_quant_fp8_amx()).
//
// BF16 on AMX (W16A16, matmul_quant_bf16_amx()): the same kernels, x prepared the same way;
// where an FP8 row is decoded into the A buffer, a BF16 row is copied, each 64-column step
// permuted into prepare_x_fp8's order (amx_bf16_row). The weights are exact; the error is x's
// rounding to bf16 plus the sums' fp32 rounding (twin: ref::matmul on bf16(x)). No scales.
constexpr int64_t kAmxRows = 16;              // rows of an A or C tile
constexpr int64_t kAmxXBlockBytes = 1 << 20;  // prepared x per block (L2 keeps it; see amx_gemm)
constexpr int64_t kAmxChunkSteps = 8;         // GEMV: 64-column steps per pipelined chunk

int64_t amx_tokens_per_tile(int64_t n) { return n == 1 ? 1 : 16; }
int64_t amx_ksteps(int64_t cols) { return (cols + kFp8Step - 1) / kFp8Step * 2; }  // always even
int64_t amx_x_tiles_bytes(int64_t cols, int64_t n) {
  const int64_t per_tile = amx_tokens_per_tile(n);
  return (n + per_tile - 1) / per_tile * amx_ksteps(cols) * 64 * per_tile;
}
// The columns the tile kernels see: an F16 row of `cols` is a bf16 row of twice as many, each
// 64-column step once as its bf16 high parts and once as the remainders (amx_f16_row), and x
// is repeated to match (prepare_x_amx).
int64_t amx_cols(const WeightView& w) {
  return w.dtype == DType::kF16 ? 2 * ((w.cols + kFp8Step - 1) / kFp8Step * kFp8Step) : w.cols;
}
int64_t amx_x_bytes(const WeightView& w, int64_t n) { return amx_x_tiles_bytes(amx_cols(w), n); }

// One x row as prepare_x_fp8 writes it, or with repeat (F16 weights, amx_cols) every 128-byte
// step written twice in a row: out holds fp8_x_stride(cols) bytes, twice that with repeat.
DENSA_AVX512 void prepare_x_amx_row(const float* x, int64_t cols, bool repeat, uint8_t* out) {
  if (!repeat) return prepare_x_fp8(x, cols, out);
  thread_local std::vector<uint8_t> scratch;
  scratch.resize(static_cast<size_t>(fp8_x_stride(cols) + 64));
  uint8_t* once = kernels_internal::align64(scratch.data());
  prepare_x_fp8(x, cols, once);
  for (int64_t s = 0; s < fp8_x_stride(cols) / kFp8StepBytes; ++s) {
    const __m512i lo = _mm512_load_si512(once + s * kFp8StepBytes), hi = _mm512_load_si512(once + s * kFp8StepBytes + 64);
    for (int half = 0; half < 2; ++half) {
      _mm512_store_si512(out + (2 * s + half) * kFp8StepBytes, lo);
      _mm512_store_si512(out + (2 * s + half) * kFp8StepBytes + 64, hi);
    }
  }
}

// Rows [i_begin, i_end) of x into their B tiles (token i: dword 16 p + i % 16 of each B tile of
// token tile i / 16); the call that ends at n also zeroes the padding tokens of the last tile.
// repeat: every step twice (F16 weights, amx_cols).
DENSA_AVX512 void prepare_x_amx_rows(const float* x, int64_t n, int64_t cols, bool repeat, int64_t i_begin,
                                     int64_t i_end, uint8_t* xp) {
  if (n == 1) {  // one token: B row p is pair p of the step, which is prepare_x_fp8's own layout
    prepare_x_amx_row(x, cols, repeat, xp);
    return;
  }
  const int64_t row_bytes = fp8_x_stride(cols) * (repeat ? 2 : 1);
  const int64_t q_steps = row_bytes / 64;
  thread_local std::vector<uint8_t> scratch;
  scratch.resize(static_cast<size_t>(row_bytes + 64));
  uint8_t* row = kernels_internal::align64(scratch.data());
  const __m512i pair_to_dword = _mm512_set_epi32(240, 224, 208, 192, 176, 160, 144, 128, 112, 96, 80, 64, 48, 32, 16, 0);
  const int64_t i_stop = i_end == n ? (n + 15) / 16 * 16 : i_end;
  for (int64_t i = i_begin; i < i_stop; ++i) {
    if (i < n) prepare_x_amx_row(x + i * cols, cols, repeat, row);
    uint8_t* tile0 = xp + (i / 16) * q_steps * kAmxTileBytes + (i % 16) * 4;
    for (int64_t q = 0; q < q_steps; ++q) {
      const __m512i v = i < n ? _mm512_load_si512(row + q * 64) : _mm512_setzero_si512();
      _mm512_i32scatter_epi32(tile0 + q * kAmxTileBytes, pair_to_dword, v, 4);
    }
  }
}

using kernels_internal::AmxTileConfig;

// All 8 tiles 16 rows; A tiles (a_mask) 64 bytes wide, the others (B and C) 4 * tokens.
AmxTileConfig amx_config(int64_t tokens, unsigned a_mask) {
  AmxTileConfig c;
  for (int t = 0; t < 8; ++t) c.set(t, 16, (a_mask >> t & 1u) ? 64 : static_cast<int>(4 * tokens));
  return c;
}

// bf16 bytes of value(code) * scale for the codes 0x00 .. 0x7f of one scale block.
struct alignas(64) ScaledLut {
  uint8_t hi[128];
  uint8_t lo[128];
};

struct AmxScratch {
  uint8_t* a = nullptr;       // 32 decoded rows (GEMM: all K; GEMV: two buffers of one chunk)
  ScaledLut* luts = nullptr;  // [row block of the pair][scale block]: the tables of one row pair
  const ScaledLut* row_luts[32] = {};  // row i of the pair: its row block's tables
  float* c = nullptr;         // 4 C tiles as stored, [16 rows][16 tokens] each
};

DENSA_AVX512 void build_scaled_luts(const WeightView& w, int64_t row_block, ScaledLut* luts) {
  const float* table = fp8_e4m3_decode_table();  // codes 0..127: the non-negative values
  const int64_t blocks = (w.cols + w.scale_cols - 1) / w.scale_cols;
  const float* srow = w.scales_f32 + row_block * blocks;
  for (int64_t b = 0; b < blocks; ++b) {
    const __m512 sc = _mm512_set1_ps(srow[b]);
    for (int k = 0; k < 4; ++k) {  // codes 32 k .. 32 k + 31
      const __m512 v0 = _mm512_mul_ps(_mm512_loadu_ps(table + 32 * k), sc);
      const __m512 v1 = _mm512_mul_ps(_mm512_loadu_ps(table + 32 * k + 16), sc);
      const __m512bh h = _mm512_cvtne2ps_pbh(v1, v0);  // round to nearest even; NaN stays NaN
      const __m512i words = reinterpret_cast<const __m512i&>(h);
      _mm256_store_si256(reinterpret_cast<__m256i*>(luts[b].hi + 32 * k), _mm512_cvtepi16_epi8(_mm512_srli_epi16(words, 8)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(luts[b].lo + 32 * k), _mm512_cvtepi16_epi8(words));
    }
  }
}

// Row blocks a row pair from r0 can touch (the tables kept at once).
int64_t amx_lut_sets(const WeightView& w) { return std::min<int64_t>(2 * kAmxRows, (2 * kAmxRows - 1) / w.scale_rows + 2); }

// The tables of the row blocks of the pair's rows [r0, r_hi), and each row's pointer to them.
void amx_build_pair_luts(const WeightView& w, int64_t r0, int64_t r_hi, AmxScratch& s) {
  if (half_float(w.dtype)) return;  // no scales
  const int64_t blocks = (w.cols + w.scale_cols - 1) / w.scale_cols;
  const int64_t rb0 = r0 / w.scale_rows;
  for (int64_t rb = rb0; rb <= (r_hi - 1) / w.scale_rows; ++rb) build_scaled_luts(w, rb, s.luts + (rb - rb0) * blocks);
  for (int64_t r = r0; r < r_hi; ++r) s.row_luts[r - r0] = s.luts + (r / w.scale_rows - rb0) * blocks;
}

// One row's steps [st_begin, st_end) decoded to bf16(value * scale) into out, 128 bytes per
// step: a row of an A buffer. Prefetches its stream 512 bytes ahead into L1 and `far` bytes
// ahead into L2 (the same spot of the next row pair: the GEMV walks 32 rows in chunks, too
// many streams for the hardware prefetchers, and ran 2 threads at ~half the vdpbf16ps path's
// bandwidth without it).
DENSA_AVX512_INLINE void amx_decode_row(const uint8_t* rp, int64_t cols, int64_t st_begin, int64_t st_end,
                                        int64_t per_block, const ScaledLut* luts, uint8_t* out, int64_t far) {
  int64_t blk = st_begin / per_block;
  __m512i lut[4] = {_mm512_load_si512(luts[blk].hi), _mm512_load_si512(luts[blk].hi + 64),
                    _mm512_load_si512(luts[blk].lo), _mm512_load_si512(luts[blk].lo + 64)};
  for (int64_t st = st_begin; st < st_end; ++st, out += 128) {
    if (st / per_block != blk) {
      blk = st / per_block;
      lut[0] = _mm512_load_si512(luts[blk].hi);
      lut[1] = _mm512_load_si512(luts[blk].hi + 64);
      lut[2] = _mm512_load_si512(luts[blk].lo);
      lut[3] = _mm512_load_si512(luts[blk].lo + 64);
    }
    _mm_prefetch(reinterpret_cast<const char*>(rp + st * kFp8Step + kPrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(rp + st * kFp8Step + far), _MM_HINT_T1);
    const __m512i codes = (st + 1) * kFp8Step <= cols ? _mm512_loadu_si512(rp + st * kFp8Step)
                                                      : _mm512_maskz_loadu_epi8(byte_mask(cols - st * kFp8Step), rp + st * kFp8Step);
    __m512i w0, w1;
    fp8_to_bf16(codes, lut, w0, w1);
    _mm512_store_si512(out, w0);
    _mm512_store_si512(out + 64, w1);
  }
}

// Word indices that put 64 bf16 values (elements 0..31 in one vector, 32..63 in another) into
// prepare_x_fp8's per-64 order: two vpermt2w, one per output vector.
alignas(64) constexpr int16_t kStepOrder[2][32] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23, 32, 33, 34, 35, 36, 37, 38, 39, 48, 49, 50, 51, 52, 53, 54, 55},
    {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31, 40, 41, 42, 43, 44, 45, 46, 47, 56, 57, 58, 59, 60, 61, 62, 63}};

// The two lines of a 16-bit row's 64-column step at src: kPrefetchBytes ahead into L1 and `far`
// ahead into L2, as amx_decode_row does for an FP8 step's one line. Inlined, so the compiler
// keeps the prefetches (GCC deletes calls to a function whose only effects are prefetches;
// tests/kernels/prefetch_codegen_test.cpp).
DENSA_AVX512_INLINE void prefetch_step16(const uint8_t* src, int64_t far) {
  _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchBytes), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(src + 64 + kPrefetchBytes), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(src + far), _MM_HINT_T1);
  _mm_prefetch(reinterpret_cast<const char*>(src + 64 + far), _MM_HINT_T1);
}

// A BF16 row's steps [st_begin, st_end) as amx_decode_row writes an FP8 row's: the stored bf16
// values (exact: nothing is decoded or scaled), each 64-column step permuted into the per-64
// order of prepare_x_fp8, so both dtypes share the prepared x. Zeros past cols; the same
// prefetches.
DENSA_AVX512_INLINE void amx_bf16_row(const uint8_t* rp, int64_t cols, int64_t st_begin, int64_t st_end,
                                      uint8_t* out, int64_t far) {
  const __m512i i0 = _mm512_load_si512(kStepOrder[0]), i1 = _mm512_load_si512(kStepOrder[1]);
  for (int64_t st = st_begin; st < st_end; ++st, out += 128) {
    const uint8_t* src = rp + st * 128;
    prefetch_step16(src, far);
    __m512i a, b;
    if ((st + 1) * kFp8Step <= cols) {
      a = _mm512_loadu_si512(src);
      b = _mm512_loadu_si512(src + 64);
    } else {
      const int64_t left = cols - st * kFp8Step;  // 1..63 elements
      a = _mm512_maskz_loadu_epi16(word_mask(left), src);
      b = _mm512_maskz_loadu_epi16(word_mask(left - 32), src + 64);
    }
    _mm512_store_si512(out, _mm512_permutex2var_epi16(a, i0, b));
    _mm512_store_si512(out + 64, _mm512_permutex2var_epi16(a, i1, b));
  }
}

// bf16 words [16 half, 16 half + 16) of `words` as fp32 (exact).
DENSA_AVX512_INLINE __m512 bf16_words_f32(__m512i words, int half) {
  const __m256i w16 = half ? _mm512_extracti64x4_epi64(words, 1) : _mm512_castsi512_si256(words);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w16), 16));
}

// An F16 row as a bf16 row of twice the steps (amx_cols): step 2s holds bf16(w) of the row's
// 64-column step s (round to nearest even), step 2s + 1 the remainders w - bf16(w), both in
// prepare_x_fp8's order. Every f16 value is exactly that sum (11 significant bits: 8 in the
// high part, the rest, with its exponent, in a bf16 of its own), so with x repeated for both
// steps the products are those of the exact f16 weights. Zeros past cols. st_begin is even
// (chunks and row passes hold whole pairs of steps), so each f16 step is read and converted
// once for both of its steps; a trailing odd st_end (never asked for) would write the high part.
DENSA_AVX512_INLINE void amx_f16_row(const uint8_t* rp, int64_t cols, int64_t st_begin, int64_t st_end, uint8_t* out,
                                     int64_t far) {
  const __m512i i0 = _mm512_load_si512(kStepOrder[0]), i1 = _mm512_load_si512(kStepOrder[1]);
  for (int64_t vst = st_begin; vst < st_end; vst += 2, out += 256) {
    const int64_t st = vst / 2;
    const uint8_t* src = rp + st * 128;
    prefetch_step16(src, far);
    const int64_t left = cols - st * kFp8Step;
    __m512 v[4];
    for (int q = 0; q < 4; ++q) {
      const __m256i h = _mm256_maskz_loadu_epi16(static_cast<__mmask16>(word_mask(left - 16 * q)), src + 32 * q);
      v[q] = _mm512_cvtph_ps(h);
    }
    const __m512bh a = _mm512_cvtne2ps_pbh(v[1], v[0]), b = _mm512_cvtne2ps_pbh(v[3], v[2]);
    const __m512i ai = reinterpret_cast<const __m512i&>(a), bi = reinterpret_cast<const __m512i&>(b);
    _mm512_store_si512(out, _mm512_permutex2var_epi16(ai, i0, bi));
    _mm512_store_si512(out + 64, _mm512_permutex2var_epi16(ai, i1, bi));
    if (vst + 1 >= st_end) break;
    // w - bf16(w): exact in fp32, and exact again as a bf16.
    const __m512bh ra = _mm512_cvtne2ps_pbh(_mm512_sub_ps(v[1], bf16_words_f32(ai, 1)), _mm512_sub_ps(v[0], bf16_words_f32(ai, 0)));
    const __m512bh rb = _mm512_cvtne2ps_pbh(_mm512_sub_ps(v[3], bf16_words_f32(bi, 1)), _mm512_sub_ps(v[2], bf16_words_f32(bi, 0)));
    const __m512i rai = reinterpret_cast<const __m512i&>(ra), rbi = reinterpret_cast<const __m512i&>(rb);
    _mm512_store_si512(out + 128, _mm512_permutex2var_epi16(rai, i0, rbi));
    _mm512_store_si512(out + 192, _mm512_permutex2var_epi16(rai, i1, rbi));
  }
}

// Row i of the pair from r0, steps [st_begin, st_end), decoded into a + i * stride (an A tile is
// 16 of these rows, 64 bytes each, loaded at that stride); zero for rows at or past r_end. The
// pair's tables are built (amx_build_pair_luts).
DENSA_AVX512_INLINE void amx_decode_pair_row(const WeightView& w, int64_t r0, int64_t r_end, int i, int64_t st_begin,
                                             int64_t st_end, uint8_t* a, int64_t stride, const AmxScratch& s) {
  uint8_t* out = a + i * stride;
  const int64_t r = r0 + i;
  if (r >= r_end) {
    std::memset(out, 0, static_cast<size_t>(128 * (st_end - st_begin)));
    return;
  }
  const int64_t row_bytes = w.row_bytes();
  const uint8_t* rp = static_cast<const uint8_t*>(w.data) + r * row_bytes;
  if (w.dtype == DType::kBF16) return amx_bf16_row(rp, w.cols, st_begin, st_end, out, 2 * kAmxRows * row_bytes);
  if (w.dtype == DType::kF16) {
    DCHECK(st_begin % 2 == 0) << "F16 rows are decoded in whole pairs of steps";
    return amx_f16_row(rp, w.cols, st_begin, st_end, out, 2 * kAmxRows * row_bytes);
  }
  amx_decode_row(rp, w.cols, st_begin, st_end, w.scale_cols / kFp8Step, s.row_luts[i], out, 2 * kAmxRows * row_bytes);
}

// Rows [r0, r0 + 16 * ra) of a pair, steps [st_begin, st_end), as amx_decode_pair_row.
DENSA_AVX512 void amx_decode_rows(const WeightView& w, int64_t r0, int64_t r_end, int ra, int64_t st_begin,
                                  int64_t st_end, uint8_t* a, int64_t stride, const AmxScratch& s) {
  for (int i = 0; i < 16 * ra; ++i) amx_decode_pair_row(w, r0, r_end, i, st_begin, st_end, a, stride, s);
}

// Per-thread scratch: the A buffer (GEMM: 2 row tiles over all K, 176 KiB at 2,816 columns;
// GEMV: two chunks), the tables of one row pair and 4 C tiles.
AmxScratch amx_scratch(const WeightView& w, int64_t a_bytes) {
  const int64_t blocks = half_float(w.dtype) ? 0 : (w.cols + w.scale_cols - 1) / w.scale_cols;
  const size_t lut_bytes = blocks == 0 ? 0 : static_cast<size_t>(amx_lut_sets(w) * blocks) * sizeof(ScaledLut);
  thread_local std::vector<uint8_t> storage;
  storage.resize(static_cast<size_t>(a_bytes) + lut_bytes + 4 * kAmxTileBytes + 64);
  uint8_t* base = kernels_internal::align64(storage.data());
  AmxScratch s;
  s.a = base;
  s.luts = reinterpret_cast<ScaledLut*>(base + a_bytes);
  s.c = reinterpret_cast<float*>(base + a_bytes + lut_bytes);
  return s;
}

// GEMM (N = 16): RA row tiles x TB token tiles (C tile 2 h + u; A tiles 4, 5; B tiles 6, 7) over
// all K, then y from the stored C tiles.
template <int RA, int TB>
DENSA_AMX void amx_pass(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r0, int64_t r_end,
                        int64_t t0, int64_t a_stride, const AmxScratch& s) {
  const int64_t q_steps = amx_ksteps(amx_cols(w));
  const uint8_t* b0 = xp + t0 * q_steps * kAmxTileBytes;
  const uint8_t* b1 = b0 + q_steps * kAmxTileBytes;
  _tile_zero(0);
  if constexpr (TB > 1) _tile_zero(1);
  if constexpr (RA > 1) _tile_zero(2);
  if constexpr (RA > 1 && TB > 1) _tile_zero(3);
  for (int64_t q = 0; q < q_steps; ++q) {
    _tile_loadd(4, s.a + q * 64, a_stride);
    _tile_loadd(6, b0 + q * kAmxTileBytes, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (TB > 1) {
      _tile_loadd(7, b1 + q * kAmxTileBytes, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (RA > 1) {
      _tile_loadd(5, s.a + 16 * a_stride + q * 64, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (TB > 1) _tile_dpbf16ps(3, 5, 7);
    }
  }
  constexpr int64_t kC = 256;  // floats per stored C tile
  _tile_stored(0, s.c, 64);
  if constexpr (TB > 1) _tile_stored(1, s.c + kC, 64);
  if constexpr (RA > 1) _tile_stored(2, s.c + 2 * kC, 64);
  if constexpr (RA > 1 && TB > 1) _tile_stored(3, s.c + 3 * kC, 64);
  DENSA_MEMORY_BARRIER();
  for (int t = 0; t < 4; ++t) {
    const int h = t / 2, u = t % 2;
    if (h >= RA || u >= TB) continue;
    const int64_t rb = r0 + 16 * h;
    const int64_t rows = std::min<int64_t>(16, r_end - rb);
    const int64_t tok0 = (t0 + u) * 16;
    const int64_t toks = std::min<int64_t>(16, n - tok0);
    const float* c = s.c + t * kC;
    for (int64_t j = 0; j < toks; ++j) {
      float* yr = y + (tok0 + j) * w.rows + rb;
      for (int64_t r = 0; r < rows; ++r) yr[r] = c[r * 16 + j];
    }
  }
  DENSA_MEMORY_BARRIER();  // these reads of s.c come before the next pass's tile stores
}

DENSA_AMX void amx_gemm(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin,
                            int64_t r_end) {
  const int64_t q_steps = amx_ksteps(amx_cols(w)), steps = q_steps / 2;
  const int64_t token_tiles = (n + 15) / 16;
  // Row-major bf16 rows, padded by a line so that a tile's 16 rows do not share cache sets.
  const int64_t a_stride = q_steps * 64 + 64;
  AmxScratch s = amx_scratch(w, 2 * kAmxRows * a_stride);
  const AmxTileConfig cfg = amx_config(16, 0x30);
  _tile_loadconfig(&cfg);
  // A block of token tiles whose B tiles stay in L2 while every row pair of this thread runs
  // over them (the weights are decoded once per block; 512 tokens at 1,024 columns is one).
  const int64_t block_tiles = std::max<int64_t>(2, kAmxXBlockBytes / (q_steps * kAmxTileBytes) / 2 * 2);
  for (int64_t tb = 0; tb < token_tiles; tb += block_tiles) {
    const int64_t tb_end = std::min(token_tiles, tb + block_tiles);
    for (int64_t r0 = r_begin; r0 < r_end; r0 += 2 * kAmxRows) {
      const int ra = r_end - r0 > kAmxRows ? 2 : 1;
      amx_build_pair_luts(w, r0, std::min(r_end, r0 + 2 * kAmxRows), s);
      amx_decode_rows(w, r0, r_end, ra, 0, steps, s.a, a_stride, s);
      DENSA_MEMORY_BARRIER();
      for (int64_t t0 = tb; t0 < tb_end; t0 += 2) {
        const bool two = t0 + 1 < tb_end;
        if (ra == 2) {
          two ? amx_pass<2, 2>(w, xp, n, y, r0, r_end, t0, a_stride, s) : amx_pass<2, 1>(w, xp, n, y, r0, r_end, t0, a_stride, s);
        } else {
          two ? amx_pass<1, 2>(w, xp, n, y, r0, r_end, t0, a_stride, s) : amx_pass<1, 1>(w, xp, n, y, r0, r_end, t0, a_stride, s);
        }
      }
    }
  }
  _tile_release();
}

// GEMV tile work: K-step q (the j-th of its chunk, whose A tiles start at a) for row tile h,
// into C tile h. x goes to B tile 6 or 7 and the rows to A tiles 2, 3 or 4, 5 by the parity of
// j, so a tile is loaded again only two K-steps after the products that read it.
DENSA_AMX_INLINE void amx_gemv_op(const uint8_t* a, int64_t stride, const uint8_t* x, int64_t q, int j, int h) {
  const uint8_t* at = a + 16 * h * stride + 64 * j;
  switch ((j & 1) * 2 + h) {
    case 0:
      _tile_loadd(6, x + q * 64, 4);
      _tile_loadd(2, at, stride);
      _tile_dpbf16ps(0, 2, 6);
      break;
    case 1:
      _tile_loadd(3, at, stride);
      _tile_dpbf16ps(1, 3, 6);
      break;
    case 2:
      _tile_loadd(7, x + q * 64, 4);
      _tile_loadd(4, at, stride);
      _tile_dpbf16ps(0, 4, 7);
      break;
    default:
      _tile_loadd(5, at, stride);
      _tile_dpbf16ps(1, 5, 7);
      break;
  }
}

// GEMV (n = 1, N = 1), software-pipelined in chunks of kAmxChunkSteps 64-column steps of a row
// pair: the vector units decode the next chunk (of this pair, or the first of the next pair)
// into the other of two chunk buffers (which stay in L1) while the tile work of this chunk is
// spread between its rows, so the tile unit and the decode overlap (issued one after the other
// they added up: ~5 GB/s instead of ~15 from L2).
DENSA_AMX void amx_gemv(const WeightView& w, const uint8_t* xp, float* y, int64_t r_begin, int64_t r_end) {
  const int64_t steps = (amx_cols(w) + kFp8Step - 1) / kFp8Step;
  const int64_t a_stride = kAmxChunkSteps * 128 + 64;  // padded as in amx_gemm
  const int64_t chunk_bytes = 2 * kAmxRows * a_stride;
  AmxScratch s = amx_scratch(w, 2 * chunk_bytes);
  const AmxTileConfig cfg = amx_config(1, 0x3c);
  _tile_loadconfig(&cfg);
  auto ra_of = [&](int64_t r0) { return r_end - r0 > kAmxRows ? 2 : 1; };
  amx_build_pair_luts(w, r_begin, std::min(r_end, r_begin + 2 * kAmxRows), s);
  amx_decode_rows(w, r_begin, r_end, ra_of(r_begin), 0, std::min(steps, kAmxChunkSteps), s.a, a_stride, s);
  int buf = 0;
  for (int64_t r0 = r_begin; r0 < r_end; r0 += 2 * kAmxRows) {
    const int ra = ra_of(r0);
    const int64_t r1 = r0 + 2 * kAmxRows;
    _tile_zero(0);
    _tile_zero(1);
    for (int64_t st = 0; st < steps; st += kAmxChunkSteps, buf ^= 1) {
      DENSA_MEMORY_BARRIER();  // the chunk's decode stores come before its tile loads
      const uint8_t* a = s.a + buf * chunk_bytes;
      const int nq = static_cast<int>(2 * (std::min(steps, st + kAmxChunkSteps) - st));
      const int ops = nq * ra;
      // What to decode meanwhile: the next chunk of this pair, or the first of the next pair.
      int64_t d_r0 = r0, d_st = st + kAmxChunkSteps;
      if (d_st >= steps) {
        d_r0 = r1;
        d_st = 0;
        if (d_r0 < r_end) amx_build_pair_luts(w, d_r0, std::min(r_end, d_r0 + 2 * kAmxRows), s);
      }
      int op = 0;
      if (d_r0 < r_end) {
        const int64_t d_end = std::min(steps, d_st + kAmxChunkSteps);
        uint8_t* next = s.a + (buf ^ 1) * chunk_bytes;
        const int d_rows = 16 * ra_of(d_r0);
        for (int i = 0; i < d_rows; ++i) {
          amx_decode_pair_row(w, d_r0, r_end, i, d_st, d_end, next, a_stride, s);
          // The tile work of this chunk, one op per d_rows / ops rows.
          if (op < ops && (i + 1) * ops >= (op + 1) * d_rows) {
            amx_gemv_op(a, a_stride, xp, 2 * st + op / ra, op / ra, op % ra);
            ++op;
          }
        }
      }
      for (; op < ops; ++op) amx_gemv_op(a, a_stride, xp, 2 * st + op / ra, op / ra, op % ra);
    }
    _tile_stored(0, s.c, 4);
    _tile_stored(1, s.c + 16, 4);
    DENSA_MEMORY_BARRIER();
    _mm512_mask_storeu_ps(y + r0, float_mask(r_end - r0), _mm512_load_ps(s.c));
    if (ra > 1) _mm512_mask_storeu_ps(y + r0 + 16, float_mask(r_end - r0 - 16), _mm512_load_ps(s.c + 16));
  }
  _tile_release();
}

void amx_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin, int64_t r_end) {
  if (n == 1) return amx_gemv(w, xp, y, r_begin, r_end);
  amx_gemm(w, xp, n, y, r_begin, r_end);
}

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
DENSA_AVX512_INLINE __m512 int8t_group_fma(__m512 acc, __m512i sum, __m512 w_scales, float x_scale) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(w_scales, _mm512_set1_ps(x_scale)), acc);
}

DENSA_AVX512_INLINE __m512 int8t_load_scales(const uint8_t* scales) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
}

template <int T, bool kPrefetch>
DENSA_AVX512_INLINE void int8t_vnni(const Args& a, int64_t tile, int64_t i0) {
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

DENSA_AMX_INT8 __attribute__((always_inline)) inline void int8t_amx_epilogue(const int32_t* cbuf, const uint8_t* scales,
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
DENSA_AMX_INT8 void int8t_amx(const Args& a, int64_t tile, int64_t i0) {
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

DENSA_AMX_INT8 void int8t_amx_begin() { _tile_loadconfig(&int8t_config()); }

DENSA_AMX_INT8 void int8t_amx_end() { _tile_release(); }

bool amx_int8_usable();

DENSA_AVX512 void int8_tiles_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  CHECK(r_begin % kInt8TileRows == 0 && r_end % kInt8TileRows == 0) << "int8 tiles: rows " << r_begin << ".." << r_end;
  const bool amx = n >= 16 && amx_int8_usable();
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

void rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  if (a.w->layout == WeightLayout::kAffineTiles16) {
    return affine_tiles_rows_avx512(*a.w, a.xp, a.x_stride, n, a.y, r_begin, r_end);
  }
  if (is_affine_rows(a.w->dtype)) return affine_rows_avx512(*a.w, a.xp, a.x_stride, n, a.y, r_begin, r_end);
  if (a.w->layout == WeightLayout::kInt8Tiles16) return int8_tiles_rows(a, n, r_begin, r_end);
  if (a.w->layout == WeightLayout::kInt4Tiles8) {
    return a.w->scales_f16 != nullptr ? int4_tiles_rows<true>(a, n, r_begin, r_end)
                                      : int4_tiles_rows<false>(a, n, r_begin, r_end);
  }
  if (a.w->dtype == DType::kFP8E4M3) {
    if (n == 1) return row_tiles<Fmt::kFp8, 4, 1>(a, n, r_begin, r_end);
    return fp8_gemm_rows(a, n, r_begin, r_end);
  }
  if (a.w->dtype == DType::kI8) {
    if (n == 1) return row_tiles<Fmt::kInt8, 8, 1>(a, n, r_begin, r_end);
    return row_tiles<Fmt::kInt8, 4, 3>(a, n, r_begin, r_end);
  }
  if (a.w->scales_f16 != nullptr) {
    if (n == 1) return row_tiles<Fmt::kInt4F16, 8, 1>(a, n, r_begin, r_end);
    return row_tiles<Fmt::kInt4F16, 4, 3>(a, n, r_begin, r_end);
  }
  if (n == 1) return row_tiles<Fmt::kInt4Bf16, 8, 1>(a, n, r_begin, r_end);
  return row_tiles<Fmt::kInt4Bf16, 4, 3>(a, n, r_begin, r_end);
}

bool have_vbmi() {
  static const bool v = __builtin_cpu_supports("avx512vbmi");
  return v;
}

bool have_gfni() {
  static const bool v = __builtin_cpu_supports("gfni");
  return v;
}

// -1: cpu_use_amx() with AMX-INT8; 0 / 1: forced by matmul_quant_int8_force_amx.
std::atomic<int> g_int8_amx_forced{-1};

bool amx_int8_usable() {
  const int forced = g_int8_amx_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? forced == 1 : cpu_use_amx() && cpu_has_amx_int8();
}

// -1: cpu_use_amx(); 0 / 1: forced by matmul_quant_fp8_force_amx / matmul_quant_bf16_force_amx.
std::atomic<int> g_fp8_amx_forced{-1};
std::atomic<int> g_bf16_amx_forced{-1};

bool on_amx(const WeightView& w) {
  return (w.dtype == DType::kFP8E4M3 && matmul_quant_fp8_amx()) || (half_float(w.dtype) && matmul_quant_bf16_amx());
}

}  // namespace

bool matmul_quant_avx512_supports(const WeightView& w) {
  if (half_float(w.dtype)) return w.layout == WeightLayout::kRows && matmul_quant_bf16_amx();
  if (is_affine_rows(w.dtype)) {  // GGUF K-quants / IQ4 / MXFP4 repacked (kernels/internal/matmul_affine.h)
    const bool layout = w.layout == WeightLayout::kRows ||
                        (w.layout == WeightLayout::kAffineTiles16 && w.rows % kAffineTileRows == 0);
    return layout && w.cols % kAffineBlock == 0 &&
           static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16);
  }
  if (w.scale_rows <= 0 || w.scale_cols <= 0) return false;
  if (static_cast<int>(cpu_isa_hardware()) < static_cast<int>(CpuIsa::kAvx512Bf16)) return false;
  if (w.dtype == DType::kFP8E4M3) return w.scales_f32 != nullptr && have_vbmi() && w.scale_cols % kFp8Step == 0;
  if (w.dtype == DType::kI8) {  // GGUF Q8_0 repacked: f16 scales per 32
    if (w.layout == WeightLayout::kInt8Tiles16) return w.rows % 16 == 0 && w.cols % kInt8TileCols == 0;
    if (w.layout != WeightLayout::kRows) return false;
    return w.scales_f16 != nullptr && w.scale_rows == 1 && w.scale_cols == kActQ8Block && w.cols % kActQ8Block == 0;
  }
  if (w.dtype == DType::kI4) {
    if ((w.scales_bf16 == nullptr) == (w.scales_f16 == nullptr)) return false;  // exactly one scale format
    if (w.layout == WeightLayout::kInt4Tiles8) return matmul_quant_avx512_int4_tiles_supported();
    const int64_t g = w.scale_cols;
    return w.scale_rows == 1 && g % 32 == 0 && w.cols % g == 0 && (kInt4Chunk % g == 0 || g % kInt4Chunk == 0);
  }
  return false;
}

bool matmul_quant_avx512_int8_tiles_supported() {
  return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16);
}

bool matmul_quant_int8_amx_usable() { return amx_int8_usable(); }

DENSA_AVX512 void activation_q8_quantize_avx512(const float* x, int64_t cols, int8_t* q, float* sx) {
  CHECK(cols % 128 == 0) << "activation_q8_quantize_avx512: cols " << cols;
  for (int64_t k0 = 0; k0 < cols; k0 += 128) quantize_x128(x, cols, k0, q + k0, sx + k0 / 32);
}

void matmul_quant_int8_force_amx(std::optional<bool> on) {
  CHECK(!on.value_or(false) || (cpu_has_amx_int8() && cpu_use_amx())) << "matmul: AMX-INT8 forced on without it";
  g_int8_amx_forced.store(on.has_value() ? (*on ? 1 : 0) : -1, std::memory_order_relaxed);
}

bool matmul_quant_avx512_int4_tiles_supported() {
  return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16) && have_vbmi() && have_gfni();
}

bool matmul_quant_fp8_amx() {
  const int forced = g_fp8_amx_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? forced == 1 : cpu_use_amx();
}

void matmul_quant_fp8_force_amx(std::optional<bool> on) {
  CHECK(!on.value_or(false) || cpu_has_amx_bf16()) << "matmul: AMX forced on without AMX-BF16";
  g_fp8_amx_forced.store(on.has_value() ? (*on ? 1 : 0) : -1, std::memory_order_relaxed);
}

bool matmul_quant_bf16_amx() {
  const int forced = g_bf16_amx_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? forced == 1
                     : cpu_use_amx() && static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16);
}

void matmul_quant_bf16_force_amx(std::optional<bool> on) {
  CHECK(!on.value_or(false) || cpu_has_amx_bf16()) << "matmul: AMX forced on without AMX-BF16";
  g_bf16_amx_forced.store(on.has_value() ? (*on ? 1 : 0) : -1, std::memory_order_relaxed);
}

int64_t matmul_quant_avx512_x_bytes(const WeightView& w, int64_t n) {
  if (on_amx(w)) return amx_x_bytes(w, n);
  return n * x_stride(w);
}

void matmul_quant_avx512_prepare(const WeightView& w, const float* x, int64_t n, uint8_t* xp) {
  matmul_quant_avx512_prepare_rows(w, x, n, 0, n, xp);
}

void matmul_quant_avx512_prepare_rows(const WeightView& w, const float* x, int64_t n, int64_t i_begin, int64_t i_end,
                                      uint8_t* xp) {
  CHECK(matmul_quant_avx512_supports(w)) << "matmul avx512 quant: dtype " << dtype_name(w.dtype)
                                         << ", scale block " << w.scale_rows << "x" << w.scale_cols;
  CHECK(reinterpret_cast<uintptr_t>(xp) % 64 == 0) << "matmul avx512 quant: unaligned activations";
  CHECK(0 <= i_begin && i_begin <= i_end && i_end <= n) << "matmul avx512 quant: rows " << i_begin << ".." << i_end;
  if (on_amx(w)) return prepare_x_amx_rows(x, n, w.cols, w.dtype == DType::kF16, i_begin, i_end, xp);
  const int64_t stride = x_stride(w);
  for (int64_t i = i_begin; i < i_end; ++i) {
    if (w.dtype == DType::kFP8E4M3) {
      prepare_x_fp8(x + i * w.cols, w.cols, xp + i * stride);
    } else if (w.layout == WeightLayout::kAffineTiles16) {
      affine_tiles_prepare_x(x + i * w.cols, w.cols, w.dtype, xp + i * stride);
    } else if (is_affine_rows(w.dtype)) {
      affine_prepare_x(x + i * w.cols, w.cols, w.dtype, xp + i * stride);
    } else if (w.layout == WeightLayout::kInt8Tiles16) {
      prepare_x_int8t(x + i * w.cols, w.cols, xp + i * stride);
    } else if (w.dtype == DType::kI8) {
      prepare_x_int8(x + i * w.cols, w.cols, xp + i * stride);
    } else {
      prepare_x_int4(x + i * w.cols, w.cols, xp + i * stride);
    }
  }
}

void matmul_quant_avx512_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin,
                              int64_t r_end) {
  if (n <= 0 || r_begin >= r_end) return;
  if (on_amx(w)) return amx_rows(w, xp, n, y, r_begin, r_end);  // blocks x itself
  // A GEMM sweeps all its x rows once per weight row tile. With many x rows (a prefill step of
  // many prompts: 8,192 x 1,024 columns is 16 MB prepared) that sweep runs from L3 or DRAM for
  // every tile, so x is taken in blocks of ~kXBlockBytes that stay in L2, and the thread's
  // weight rows are streamed once per block instead. Blocks are whole x tiles (multiples of 6
  // rows); tiles only interleave independent (i, r) chains, so blocking changes no result.
  const int64_t stride = x_stride(w);
  // Whole x tiles: 6 rows (4 x 3 or 2 x 3 register tiles); the INT8 and affine 16-row tile
  // layouts: 48 (three AMX blocks of 16, twelve VNNI tiles of 4).
  const bool tiles16 = w.layout == WeightLayout::kInt8Tiles16 || w.layout == WeightLayout::kAffineTiles16;
  const int64_t tile_x = tiles16 ? 48 : 6;
  const int64_t block = std::max<int64_t>(tile_x, kXBlockBytes / stride / tile_x * tile_x);
  for (int64_t i0 = 0; i0 < n; i0 += block) {
    const Args a{&w, xp + i0 * stride, stride, y + i0 * w.rows};
    rows(a, std::min(block, n - i0), r_begin, r_end);
  }
}

bool matmul_quant_avx512_same_x_layout(const WeightView& a, const WeightView& b) {
  // The preparation reads w only for its dtype, cols and (FP8) which path runs.
  const auto own_x = [](const WeightView& w) {  // the tile layouts with their own x layout
    return w.layout == WeightLayout::kInt8Tiles16 || w.layout == WeightLayout::kAffineTiles16;
  };
  return a.dtype == b.dtype && a.cols == b.cols && own_x(a) == own_x(b);
}

int64_t matmul_quant_avx512_row_cost(const WeightView& w, int64_t n) { return w.row_bytes() + n * w.cols / 4; }

DENSA_AVX512 void fp8_e4m3_decode16_avx512(const uint8_t* codes, float* out) {
  const Fp8Lut& t = fp8_lut();
  const __m512i lut[4] = {_mm512_load_si512(t.hi), _mm512_load_si512(t.hi + 64), _mm512_load_si512(t.lo),
                          _mm512_load_si512(t.lo + 64)};
  __m512i w0, w1;
  fp8_to_bf16(_mm512_maskz_loadu_epi8(0xffff, codes), lut, w0, w1);
  // Lane 0 holds codes 0..7 (w0) and 8..15 (w1); bf16 -> fp32 is a 16-bit left shift.
  const __m512i words = _mm512_inserti32x4(_mm512_castsi128_si512(_mm512_castsi512_si128(w0)),
                                           _mm512_castsi512_si128(w1), 1);
  const __m512i f = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(words)), 16);
  _mm512_storeu_ps(out, _mm512_castsi512_ps(f));
}

}  // namespace densa::matmul_internal
