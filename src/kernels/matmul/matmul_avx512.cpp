// AVX-512 matmul kernel (see kernels/internal/matmul_isa.h for the shared contract).
// The project builds for baseline x86-64, so every function here carries a target attribute
// and only runs when the dispatcher has checked the CPU.
//
// Per (i, r): two 16-lane fp32 accumulators; block elements 0..15 go to acc0 and 16..31 to
// acc1 by one fused multiply-add each; at the end y = hsum(acc0 + acc1), a fixed tree. A partial last
// block (plain dtypes only) is decoded into a zero-padded stack block and goes the same way.
// Weights are decoded to exact fp32 values (the dequantize_row values) and x stays fp32.
// GCC 12 reports the intrinsics' own `__Y = __Y` placeholders as (maybe-)uninitialized once
// they are inlined into target-attributed code; the warning is a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>

#include "core/check.h"
#include "kernels/internal/hsum_avx512.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/internal/target.h"

namespace densa::matmul_internal {
namespace {

// Decoders: block b (elements 32b .. 32b+31) of a weight row as two fp32 vectors.
struct F32Block {
  DENSA_TARGET_AVX512_BF16_INLINE static void decode(const uint8_t* row, int64_t b, __m512& w0, __m512& w1) {
    const float* p = reinterpret_cast<const float*>(row) + b * 32;
    w0 = _mm512_loadu_ps(p);
    w1 = _mm512_loadu_ps(p + 16);
  }
};

struct F16Block {
  DENSA_TARGET_AVX512_BF16_INLINE static void decode(const uint8_t* row, int64_t b, __m512& w0, __m512& w1) {
    const uint8_t* p = row + b * 64;
    w0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    w1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
  }
};

// bf16 -> fp32 is a 16-bit left shift of the zero-extended value (exact).
struct BF16Block {
  DENSA_TARGET_AVX512_BF16_INLINE static void decode(const uint8_t* row, int64_t b, __m512& w0, __m512& w1) {
    const uint8_t* p = row + b * 64;
    const __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i c = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
    w0 = _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
    w1 = _mm512_castsi512_ps(_mm512_slli_epi32(c, 16));
  }
};

DENSA_TARGET_AVX512_BF16_INLINE float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// d * q is exact in fp32 (11-bit scale times 8-bit integer).
struct Q8_0Block {
  DENSA_TARGET_AVX512_BF16_INLINE static void decode(const uint8_t* row, int64_t b, __m512& w0, __m512& w1) {
    const uint8_t* blk = row + b * 34;
    const __m512 d = _mm512_set1_ps(load_f16(blk));
    const __m512i q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
    const __m512i q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18)));
    w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(q0), d);
    w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(q1), d);
  }
};

// Low nibbles are elements 0..15, high nibbles 16..31. d * q - 8 * d equals d * (q - 8)
// exactly (every intermediate fits in 24 bits), so one fma gives the dequantize_row value.
struct Q4_0Block {
  DENSA_TARGET_AVX512_BF16_INLINE static void decode(const uint8_t* row, int64_t b, __m512& w0, __m512& w1) {
    const uint8_t* blk = row + b * 18;
    const float df = load_f16(blk);
    const __m512 d = _mm512_set1_ps(df);
    const __m512 m8d = _mm512_set1_ps(-8.0f * df);
    const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
    const __m512i lo = _mm512_and_si512(q, _mm512_set1_epi32(0x0f));
    const __m512i hi = _mm512_srli_epi32(q, 4);
    w0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), d, m8d);
    w1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), d, m8d);
  }
};

// The fixed tree of kernels/internal/hsum_avx512.h.
DENSA_TARGET_AVX512_BF16_INLINE float hsum(__m512 v) { return kernels_internal::hsum_avx512(v); }

// One tile: R weight rows from r0 against NX rows of x from i0.
template <class Block, int R, int NX>
DENSA_TARGET_AVX512_BF16_INLINE void tile(const WeightView& w, int64_t r0, const float* x, int64_t i0, float* y) {
  const int64_t cols = w.cols;
  const int64_t num_full = cols / kBlockElems;
  const int64_t tail = cols % kBlockElems;
  const uint8_t* rp[R];
  const float* xp[NX];
  for (int r = 0; r < R; ++r) rp[r] = w.row_ptr(r0 + r);
  for (int i = 0; i < NX; ++i) xp[i] = x + (i0 + i) * cols;
  __m512 acc[R][NX][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) acc[r][i][0] = acc[r][i][1] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < num_full; ++b) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512 w0, w1;
      Block::decode(rp[r], b, w0, w1);
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        acc[r][i][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xp[i] + b * 32), acc[r][i][0]);
        acc[r][i][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xp[i] + b * 32 + 16), acc[r][i][1]);
      }
    }
  }
  if (tail != 0) {
    alignas(64) float xt[NX][kBlockElems] = {};
    for (int i = 0; i < NX; ++i) std::memcpy(xt[i], xp[i] + num_full * 32, static_cast<size_t>(tail) * 4);
    for (int r = 0; r < R; ++r) {
      alignas(64) float wt[kBlockElems] = {};
      decode_elems(w.dtype, rp[r], num_full * 32, tail, wt);
      const __m512 w0 = _mm512_load_ps(wt), w1 = _mm512_load_ps(wt + 16);
      for (int i = 0; i < NX; ++i) {
        acc[r][i][0] = _mm512_fmadd_ps(w0, _mm512_load_ps(xt[i]), acc[r][i][0]);
        acc[r][i][1] = _mm512_fmadd_ps(w1, _mm512_load_ps(xt[i] + 16), acc[r][i][1]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      y[(i0 + i) * w.rows + r0 + r] = hsum(_mm512_add_ps(acc[r][i][0], acc[r][i][1]));
    }
  }
}

// All x rows from i0 against R weight rows: tiles of NX, the remainder with smaller tiles.
template <class Block, int R, int NX>
DENSA_TARGET_AVX512_BF16 void x_tiles(const WeightView& w, int64_t r0, const float* x, int64_t i0, int64_t n, float* y) {
  for (; i0 + NX <= n; i0 += NX) tile<Block, R, NX>(w, r0, x, i0, y);
  if constexpr (NX > 1) {
    if (i0 < n) x_tiles<Block, R, NX - 1>(w, r0, x, i0, n, y);
  }
}

template <class Block, int R, int NX>
DENSA_TARGET_AVX512_BF16 void row_tiles(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin,
                                        int64_t r_end) {
  int64_t r = r_begin;
  for (; r + R <= r_end; r += R) x_tiles<Block, R, NX>(w, r, x, 0, n, y);
  for (; r < r_end; ++r) x_tiles<Block, 1, NX>(w, r, x, 0, n, y);
}

// Decode (n = 1): 8 rows at once, 16 independent fma chains (against 4 rows this cut the Q8_0 /
// Q4_0 GEMV's CPU time, and it is no slower for BF16 / F16). Prefill: 4 rows x 3 x rows = 24
// accumulators, each decoded weight block used 3 times.
template <class Block>
DENSA_TARGET_AVX512_BF16 void run(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin,
                                  int64_t r_end) {
  if (n == 1) {
    row_tiles<Block, 8, 1>(w, x, n, y, r_begin, r_end);
  } else {
    row_tiles<Block, 4, 3>(w, x, n, y, r_begin, r_end);
  }
}

}  // namespace

void matmul_rows_avx512(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin,
                        int64_t r_end) {
  switch (w.dtype) {
    case DType::kF32: return run<F32Block>(w, x, n, y, r_begin, r_end);
    case DType::kF16: return run<F16Block>(w, x, n, y, r_begin, r_end);
    case DType::kBF16: return run<BF16Block>(w, x, n, y, r_begin, r_end);
    case DType::kQ8_0: return run<Q8_0Block>(w, x, n, y, r_begin, r_end);
    case DType::kQ4_0: return run<Q4_0Block>(w, x, n, y, r_begin, r_end);
    case DType::kFP8E4M3:
    case DType::kI4:
    case DType::kI8:
    case DType::kI32:
    case DType::kU8:
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4:
    case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: break;
  }
  CHECK(false) << "matmul: unsupported weight dtype " << dtype_name(w.dtype);
}

}  // namespace densa::matmul_internal
