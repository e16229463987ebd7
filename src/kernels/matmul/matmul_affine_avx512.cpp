// AVX-512 VNNI kernel for affine-row weights; the arithmetic it must keep is stated in
// kernels/internal/matmul_affine.h. Per 128-column block and weight row: the codes with 128-bit
// lane j holding columns 0-15 (then 16-31) of group j, as the prepared x is (8-bit codes: two
// 64-byte loads regrouped; 4-bit: one load split into low and high nibbles, looked up by
// vpshufb where the nibbles index a table); vpdpbusd of the unsigned codes with the signed q;
// the block's group scales (read as fp32, or as int8 times the block's D) spread over the lanes
// by one permute; the min term as one fma of the (zero-padded) mins with the
// prepared per-group x sums.
// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>

#include "core/check.h"
#include "kernels/internal/hsum_avx512.h"
#include "kernels/internal/matmul_affine.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/internal/target.h"
#include "quant/activation_q8.h"
#include "quant/affine_rows.h"
#include "quant/block_bytes.h"

namespace densa::matmul_internal {
namespace {

using block_bytes::load_f32;
using block_bytes::load_u32;

constexpr int64_t kPrefetchBytes = 512;  // software prefetch distance per weight row (GEMV)

template <DType T, int R, int NX>
DENSA_TARGET_AVX512_VNNI_INLINE void tile(const WeightView& w, const uint8_t* xp, int64_t x_stride, float* y, int64_t r0,
                                          int64_t i0) {
  constexpr bool kG16 = T == DType::kA8K16, kSuper = is_affine_super(T);
  constexpr bool kNibbles = is_affine_nibbles(T), kLut = kNibbles && T != DType::kA4G32;
  constexpr int64_t kBlockBytes = dtype_block_bytes(T), kCodeBytes = affine_code_bytes(T);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512i lut = _mm512_setzero_si512();  // the nibbles' codes in every 128-bit lane (vpshufb)
  if constexpr (kLut) lut = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(affine_nibble_codes(T))));
  constexpr int kGroups = kG16 ? 8 : 4;
  const int64_t blocks = w.cols / kAffineBlock;
  const uint8_t* rp[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) rp[r] = w.row_ptr(r0 + r);
  // Lane l's scale index: group l / 4 (groups of 32); halves 2 (l / 4) and 2 (l / 4) + 1 (16).
  const __m512i idx_a = kG16 ? _mm512_set_epi32(6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0)
                             : _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512i idx_b = _mm512_set_epi32(7, 7, 7, 7, 5, 5, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1);
  const __mmask16 min_lanes = kG16 ? 0x00ff : 0x000f;
  __m512 acc[R][NX];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) acc[r][i] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* xs[NX];
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) xs[i] = xp + (i0 + i) * x_stride + b * kAffineXStepBytes;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rp[r] + b * kBlockBytes;
      if constexpr (NX == 1) {
        _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchBytes + 64), _MM_HINT_T0);
        if constexpr (kBlockBytes > 128) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchBytes + 128), _MM_HINT_T0);
      }
      __m512i wa, wb;  // 128-bit lane j: group j's codes of columns 0-15, then of 16-31
      if constexpr (kNibbles) {  // byte 16j + e: column 32j + e low, 32j + 16 + e high
        const __m512i v = _mm512_loadu_si512(blk);
        wa = _mm512_and_si512(v, low4);
        wb = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        if constexpr (kLut) {
          wa = _mm512_shuffle_epi8(lut, wa);
          wb = _mm512_shuffle_epi8(lut, wb);
        }
      } else {
        const __m512i v0 = _mm512_loadu_si512(blk), v1 = _mm512_loadu_si512(blk + 64);
        wa = _mm512_shuffle_i64x2(v0, v1, 0x88);
        wb = _mm512_shuffle_i64x2(v0, v1, 0xdd);
      }
      __m512 scales, mins;  // lane g < kGroups: group g's scale and min (mins: 0 in the others)
      if constexpr (kSuper) {  // D, M, then int8 s and m: D * s and M * m, exact products
        const uint8_t* sb = blk + kCodeBytes;
        const __m128i s8 = kG16 ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 8))
                                : _mm_cvtsi32_si128(load_u32(sb + 8));
        const __m128i m8 = kG16 ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 8 + kGroups))
                                : _mm_cvtsi32_si128(load_u32(sb + 8 + kGroups));
        scales = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s8)), _mm512_set1_ps(load_f32(sb)));
        mins = _mm512_maskz_mul_ps(min_lanes, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(m8)),
                                   _mm512_set1_ps(load_f32(sb + 4)));
      } else {
        const auto* sc = reinterpret_cast<const float*>(blk + kCodeBytes);
        scales = kG16 ? _mm512_castps256_ps512(_mm256_loadu_ps(sc)) : _mm512_castps128_ps512(_mm_loadu_ps(sc));
        mins = _mm512_maskz_loadu_ps(min_lanes, sc + kGroups);
      }
      const __m512 ws_a = _mm512_permutexvar_ps(idx_a, scales);
      const __m512 ws_b = kG16 ? _mm512_permutexvar_ps(idx_b, scales) : ws_a;
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const __m512i xa = _mm512_loadu_si512(xs[i]), xb = _mm512_loadu_si512(xs[i] + 64);
        const __m512 xsc = _mm512_loadu_ps(reinterpret_cast<const float*>(xs[i] + 128));
        const __m512 xsum = _mm512_loadu_ps(reinterpret_cast<const float*>(xs[i] + 192));
        if constexpr (kG16) {
          const __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, xa);
          const __m512i s2 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wb, xb);
          acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_mul_ps(ws_a, xsc), acc[r][i]);
          acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s2), _mm512_mul_ps(ws_b, xsc), acc[r][i]);
        } else {
          const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, xa), wb, xb);
          acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws_a, xsc), acc[r][i]);
        }
        acc[r][i] = _mm512_fmadd_ps(mins, xsum, acc[r][i]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) y[(i0 + i) * w.rows + r0 + r] = kernels_internal::hsum_avx512(acc[r][i]);
  }
}

// Weight rows in tiles of R (then one at a time), each tile against all x rows in tiles of NX.
template <DType T, int R, int NX>
DENSA_TARGET_AVX512_VNNI void rows_t(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y,
                                     int64_t r_begin, int64_t r_end) {
  int64_t r = r_begin;
  for (; r + R <= r_end; r += R) {
    int64_t i = 0;
    for (; i + NX <= n; i += NX) tile<T, R, NX>(w, xp, x_stride, y, r, i);
    for (; i < n; ++i) tile<T, R, 1>(w, xp, x_stride, y, r, i);
  }
  for (; r < r_end; ++r) {
    int64_t i = 0;
    for (; i + NX <= n; i += NX) tile<T, 1, NX>(w, xp, x_stride, y, r, i);
    for (; i < n; ++i) tile<T, 1, 1>(w, xp, x_stride, y, r, i);
  }
}

template <DType T>
void rows_dtype(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y, int64_t r_begin,
                int64_t r_end) {
  if (n == 1) return rows_t<T, 4, 1>(w, xp, x_stride, n, y, r_begin, r_end);
  return rows_t<T, 4, 3>(w, xp, x_stride, n, y, r_begin, r_end);
}

}  // namespace

void affine_prepare_x(const float* x, int64_t cols, DType t, uint8_t* out) {
  CHECK(is_affine_rows(t) && cols % kAffineBlock == 0) << "affine x: " << dtype_name(t) << ", cols " << cols;
  const bool g16 = t == DType::kA8K16;
  for (int64_t k0 = 0; k0 < cols; k0 += kAffineBlock, out += kAffineXStepBytes) {
    int8_t q[kAffineBlock];
    float sx[4];
    activation_q8_quantize_avx512(x + k0, kAffineBlock, q, sx);  // whole 32-column blocks: the row's q
    float lane_scale[16], group_term[16] = {};
    for (int j = 0; j < 4; ++j) {
      std::memcpy(out + 16 * j, q + 32 * j, 16);
      std::memcpy(out + 64 + 16 * j, q + 32 * j + 16, 16);
      for (int t4 = 0; t4 < 4; ++t4) lane_scale[4 * j + t4] = sx[j];
    }
    const int group = g16 ? 16 : 32;
    for (int g = 0; g < kAffineBlock / group; ++g) {
      int32_t sum = 0;
      for (int k = 0; k < group; ++k) sum += q[group * g + k];
      group_term[g] = sx[group * g / 32] * static_cast<float>(sum);
    }
    std::memcpy(out + 128, lane_scale, 64);
    std::memcpy(out + 192, group_term, 64);
  }
}

void affine_rows_avx512(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y,
                        int64_t r_begin, int64_t r_end) {
  const bool known = visit_affine_dtype(
      w.dtype, [&](auto t) { rows_dtype<decltype(t)::value>(w, xp, x_stride, n, y, r_begin, r_end); });
  CHECK(known) << "affine rows: dtype " << dtype_name(w.dtype);
}

}  // namespace densa::matmul_internal
