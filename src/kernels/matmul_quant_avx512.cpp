// AVX-512 matmul for FP8 e4m3 block-scaled and INT4 group-wise weights.
//
// Decoding (exact; every weight equals the dequantize_row value bit for bit):
//  - FP8 e4m3: the code is sign-extended to 16 bits and shifted left by 7, then bit 14 is
//    cleared. That is an f16 with the e4m3 exponent field and mantissa in place (bias 15
//    instead of 7, subnormals included: f16 subnormals are 2^-14 * 0.m, e4m3 ones 2^-6 * 0.m),
//    so vcvtph2ps gives code_value * 2^-8 exactly. The 2^8 goes into the block scale:
//    (code_value * 2^-8) * (scale * 2^8) is the same real product as code_value * scale, so it
//    rounds to the same fp32. The NaN codes 0x7f / 0xff would decode as +-480; instead each
//    row records whether it met one and then writes NaN, which is what any dot product with a
//    NaN weight gives.
//  - INT4: the two nibbles of each byte are spread to two bytes (element order), 8 is
//    subtracted, then sign-extended to int32, converted to fp32 and multiplied by the group
//    scale: (q - 8) * scale rounded once, the dequantize_row value.
//
// Reduction order per (i, r), fixed by this file alone: the row is walked in steps of 32
// elements; elements 0..15 of a step go to accumulator a0 and 16..31 to a1 by one fused
// multiply-add each (FP8 rows whose length is not a multiple of 32 end with a masked step,
// the missing elements contributing +0 products); y = hsum(a0 + a1) with a fixed tree.
// Tiling over rows and x rows only interleaves independent (i, r) chains, and threads split
// over rows only, so y[i, r] does not depend on n, the other rows of x, or the thread count.
// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/matmul_quant_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/cpu_features.h"

#define DENSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")))
#define DENSA_AVX512_INLINE DENSA_AVX512 __attribute__((always_inline)) inline

namespace densa::matmul_internal {
namespace {

constexpr int64_t kStep = 32;
constexpr int64_t kMinTaskBytes = 256 * 1024;
constexpr int64_t kRowTile = 8;

// 32 e4m3 codes (as a sign-extended word vector) -> two fp32 vectors of code_value * 2^-8.
DENSA_AVX512_INLINE void fp8_words_to_ps(__m512i sx, __m512& lo, __m512& hi) {
  const __m512i h = _mm512_and_si512(_mm512_slli_epi16(sx, 7), _mm512_set1_epi16(static_cast<short>(0xbfff)));
  lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}

// Mask of NaN codes (0x7f, 0xff) among 32 bytes.
DENSA_AVX512_INLINE __mmask32 fp8_nan_mask(__m256i b) {
  return _mm256_cmpeq_epi8_mask(_mm256_or_si256(b, _mm256_set1_epi8(static_cast<char>(0x80))),
                                _mm256_set1_epi8(static_cast<char>(0xff)));
}

struct Fp8Fmt {
  static constexpr bool kNanCodes = true;
  // Scale multiplier for a block: scale * 2^8 (exact: a power-of-two product).
  static float block_scale(float s) { return s * 256.0f; }
  // Elements [k, k + 32) of the row; `m` masks the valid ones (all for a full step).
  DENSA_AVX512_INLINE static void decode(const uint8_t* row, int64_t k, __mmask32 m, float s, __mmask32& nan,
                                         __m512& w0, __m512& w1) {
    const __m256i b = _mm256_maskz_loadu_epi8(m, row + k);
    nan |= fp8_nan_mask(b);
    __m512 lo, hi;
    fp8_words_to_ps(_mm512_cvtepi8_epi16(b), lo, hi);
    const __m512 vs = _mm512_set1_ps(s);
    w0 = _mm512_mul_ps(lo, vs);
    w1 = _mm512_mul_ps(hi, vs);
  }
};

struct Int4Fmt {
  static constexpr bool kNanCodes = false;
  static float block_scale(float s) { return s; }
  DENSA_AVX512_INLINE static void decode(const uint8_t* row, int64_t k, __mmask32 /*m*/, float s,
                                         __mmask32& /*nan*/, __m512& w0, __m512& w1) {
    // 16 bytes = 32 nibbles; word j = byte j: low nibble -> byte 2j, high nibble -> byte 2j+1.
    const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k / 2)));
    const __m256i spread = _mm256_ternarylogic_epi32(b, _mm256_slli_epi16(b, 4), _mm256_set1_epi16(0x0f0f), 0xa8);
    const __m256i q = _mm256_sub_epi8(spread, _mm256_set1_epi8(8));
    const __m512 vs = _mm512_set1_ps(s);
    w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))), vs);
    w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))), vs);
  }
};

// Fixed tree: (256-bit halves), (128-bit halves), lanes (0+2, 1+3), then (0 + 1).
DENSA_AVX512_INLINE float hsum(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4e));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xb1));
  __m128 s = _mm512_castps512_ps128(v);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Scale row of weight row r and the number of elements per scale.
inline const float* scale_row(const WeightView& w, int64_t r) {
  const int64_t scols = (w.cols + w.scale_cols - 1) / w.scale_cols;
  return w.scales + (r / w.scale_rows) * scols;
}

// One tile: R weight rows from r0 against NX rows of x from i0.
template <class Fmt, int R, int NX>
DENSA_AVX512_INLINE void tile(const WeightView& w, int64_t r0, const float* x, int64_t i0, float* y) {
  const int64_t cols = w.cols;
  const int64_t sc = w.scale_cols;
  const uint8_t* rp[R];
  const float* sp[R];
  const float* xp[NX];
  __mmask32 nan[R];
  for (int r = 0; r < R; ++r) {
    rp[r] = w.row_ptr(r0 + r);
    sp[r] = scale_row(w, r0 + r);
    nan[r] = 0;
  }
  for (int i = 0; i < NX; ++i) xp[i] = x + (i0 + i) * cols;
  __m512 acc[R][NX][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) acc[r][i][0] = acc[r][i][1] = _mm512_setzero_ps();
  }
  for (int64_t k0 = 0, blk = 0; k0 < cols; k0 += sc, ++blk) {
    const int64_t kend = std::min(cols, k0 + sc);
    float s[R];
    for (int r = 0; r < R; ++r) s[r] = Fmt::block_scale(sp[r][blk]);
    int64_t k = k0;
    for (; k + kStep <= kend; k += kStep) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m512 w0, w1;
        Fmt::decode(rp[r], k, ~__mmask32{0}, s[r], nan[r], w0, w1);
#pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          acc[r][i][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xp[i] + k), acc[r][i][0]);
          acc[r][i][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xp[i] + k + 16), acc[r][i][1]);
        }
      }
    }
    if (k < kend) {  // FP8 only: a last step shorter than 32 (INT4 rows are multiples of 32)
      const int len = static_cast<int>(kend - k);
      const __mmask32 m = static_cast<__mmask32>((1u << len) - 1u);
      const __mmask16 m0 = static_cast<__mmask16>(m), m1 = static_cast<__mmask16>(m >> 16);
      for (int r = 0; r < R; ++r) {
        __m512 w0, w1;
        Fmt::decode(rp[r], k, m, s[r], nan[r], w0, w1);
        for (int i = 0; i < NX; ++i) {
          acc[r][i][0] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m0, xp[i] + k), acc[r][i][0]);
          acc[r][i][1] = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m1, xp[i] + k + 16), acc[r][i][1]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      float v = hsum(_mm512_add_ps(acc[r][i][0], acc[r][i][1]));
      if (Fmt::kNanCodes && nan[r] != 0) v = std::numeric_limits<float>::quiet_NaN();
      y[(i0 + i) * w.rows + r0 + r] = v;
    }
  }
}

template <class Fmt, int R, int NX>
DENSA_AVX512 void x_tiles(const WeightView& w, int64_t r0, const float* x, int64_t i0, int64_t n, float* y) {
  for (; i0 + NX <= n; i0 += NX) tile<Fmt, R, NX>(w, r0, x, i0, y);
  if constexpr (NX > 1) {
    if (i0 < n) x_tiles<Fmt, R, NX - 1>(w, r0, x, i0, n, y);
  }
}

template <class Fmt, int R, int NX>
DENSA_AVX512 void row_tiles(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin,
                            int64_t r_end) {
  int64_t r = r_begin;
  for (; r + R <= r_end; r += R) x_tiles<Fmt, R, NX>(w, r, x, 0, n, y);
  for (; r < r_end; ++r) x_tiles<Fmt, 1, NX>(w, r, x, 0, n, y);
}

// Decode (n = 1): 8 rows at once, 16 independent fma chains. Prefill: 4 rows x 3 x rows.
template <class Fmt>
DENSA_AVX512 void run(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin, int64_t r_end) {
  if (n == 1) {
    row_tiles<Fmt, 8, 1>(w, x, n, y, r_begin, r_end);
  } else {
    row_tiles<Fmt, 4, 3>(w, x, n, y, r_begin, r_end);
  }
}

void rows(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin, int64_t r_end) {
  if (w.dtype == DType::kFP8E4M3) {
    run<Fp8Fmt>(w, x, n, y, r_begin, r_end);
  } else {
    run<Int4Fmt>(w, x, n, y, r_begin, r_end);
  }
}

}  // namespace

bool matmul_quant_avx512_supports(const WeightView& w) {
  if (w.scales == nullptr || w.scale_rows <= 0 || w.scale_cols <= 0 || w.scale_cols % kStep != 0) return false;
  if (w.dtype == DType::kFP8E4M3) return true;
  if (w.dtype == DType::kI4) return w.scale_rows == 1 && w.cols % w.scale_cols == 0;
  return false;
}

void matmul_quant_avx512(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  CHECK(matmul_quant_avx512_supports(w)) << "matmul avx512 quant: dtype " << dtype_name(w.dtype)
                                         << ", scale block " << w.scale_rows << "x" << w.scale_cols;
  CHECK(static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16)) << "matmul: no AVX-512";
  if (n <= 0 || w.rows <= 0) return;
  if (pool == nullptr || pool->num_threads() == 1) {
    rows(w, x, n, y, 0, w.rows);
    return;
  }
  // Split over output rows only (each y[i, r] is computed whole by one thread); cost in
  // byte-equivalents as in matmul.cpp.
  const int64_t row_cost = w.row_bytes() + n * w.cols;
  int64_t grain = std::max<int64_t>(1, kMinTaskBytes / std::max<int64_t>(1, row_cost));
  grain = (grain + kRowTile - 1) / kRowTile * kRowTile;
  pool->parallel_for(w.rows, [&](int64_t b, int64_t e) { rows(w, x, n, y, b, e); }, grain);
}

DENSA_AVX512 void fp8_e4m3_decode16_avx512(const uint8_t* codes, float* out) {
  const __m256i b = _mm256_maskz_loadu_epi8(0xffff, codes);
  const __mmask32 nan = fp8_nan_mask(b);
  __m512 lo, hi;
  fp8_words_to_ps(_mm512_cvtepi8_epi16(b), lo, hi);
  lo = _mm512_mul_ps(lo, _mm512_set1_ps(256.0f));
  lo = _mm512_mask_mov_ps(lo, static_cast<__mmask16>(nan), _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
  _mm512_storeu_ps(out, lo);
}

}  // namespace densa::matmul_internal
