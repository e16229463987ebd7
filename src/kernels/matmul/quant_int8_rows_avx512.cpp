// INT8 (GGUF Q8_0 repacked, f16 scales per 32) row-major rows on AVX-512 (W8A8 by vpdpbusd;
// kernels/internal/matmul_quant_avx512_kernels.h).

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/matmul_quant_avx512_kernels.h"

namespace densa::matmul_internal {
namespace {

// INT8 (W8A8): per 128-column step, the row's two 64-byte loads regrouped as x was
// (vshufi64x2: 128-bit lane j of each holds 16 codes of group j) and flipped to unsigned
// (code + 128, one xor); two vpdpbusd with x, started from -128 * sum(x_q), give the exact
// int32 sum of w * q over each lane's 8 elements, all of group l / 4. Scales: the step's four
// f16 weight scales widened by vcvtph2ps and spread by a lane permute, times the prepared
// per-lane x scales. Per row and x row a step costs two vpdpbusd, a multiply, a conversion
// and an fma (the per-64 form this replaced: a vpdpbusd, a subtraction, a multiply, a
// conversion and an fma per 64 columns).
template <int R, int NX>
DENSA_TARGET_AVX512_QUANT_INLINE void int8_tile(const Args& a, int64_t r0, int64_t i0) {
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

struct Int8Tile {
  template <int R, int NX>
  DENSA_TARGET_AVX512_QUANT_INLINE static void run(const Args& a, int64_t r0, int64_t i0) {
    int8_tile<R, NX>(a, r0, i0);
  }
};

}  // namespace

void int8_rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end) {
  if (n == 1) return row_tiles<Int8Tile, 8, 1>(a, n, r_begin, r_end);
  return row_tiles<Int8Tile, 4, 3>(a, n, r_begin, r_end);
}

}  // namespace densa::matmul_internal
