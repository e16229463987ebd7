// FP8 e4m3 block-scaled rows on AVX-512 (W8A16 by vdpbf16ps; kernels/internal/
// matmul_quant_avx512_kernels.h): the register-tile kernel, the GEMM over rows decoded once to
// bf16, and the in-register decoder's test hook.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/matmul_quant_avx512_kernels.h"

#include <vector>

namespace densa::matmul_internal {
namespace {

template <int R, int NX, bool kPre = false>
DENSA_TARGET_AVX512_QUANT_INLINE void fp8_tile(const Args& a, int64_t r0, int64_t i0) {
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

struct Fp8Tile {
  template <int R, int NX>
  DENSA_TARGET_AVX512_QUANT_INLINE static void run(const Args& a, int64_t r0, int64_t i0) {
    fp8_tile<R, NX>(a, r0, i0);
  }
};

// Decode (n = 1): 8 weight rows per pass. Prefill: 4 rows x 2 (FP8: a block sum and an
// accumulator per pair) or 4 x 3 (INT4) x rows, each decoded weight vector used per x row.
template <int R, int NX>
DENSA_TARGET_AVX512_QUANT void fp8_x_tiles_pre(const Args& a, int64_t r0, int64_t i0, int64_t n) {
  for (; i0 + NX <= n; i0 += NX) fp8_tile<R, NX, true>(a, r0, i0);
  if constexpr (NX > 1) {
    if (i0 < n) fp8_x_tiles_pre<R, NX - 1>(a, r0, i0, n);
  }
}

// FP8 GEMM: decode each 4-row tile to bf16 once (into a buffer of the thread's scratch that
// stays in L1/L2), then run every x tile over it.
DENSA_TARGET_AVX512_QUANT void fp8_gemm_rows(const Args& a0, int64_t n, int64_t r_begin, int64_t r_end,
                                             WorkerScratch& ws) {
  constexpr int R = 4;
  const WeightView& w = *a0.w;
  const int64_t steps = (w.cols + kFp8Step - 1) / kFp8Step;
  uint8_t* buf = ws.bytes(kernels_internal::kSlotMatmulRows, static_cast<size_t>(R * steps * kFp8StepBytes));
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

}  // namespace

void fp8_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end, WorkerScratch& ws) {
  if (n == 1) return row_tiles<Fp8Tile, 4, 1>(a, n, r_begin, r_end);
  return fp8_gemm_rows(a, n, r_begin, r_end, ws);
}

DENSA_TARGET_AVX512_QUANT void fp8_e4m3_decode16_avx512(const uint8_t* codes, float* out) {
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
