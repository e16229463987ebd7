// AVX2 + FMA + F16C matmul kernel (see kernels/internal/matmul_isa.h for the shared contract).
// Every function carries a target attribute; the dispatcher checks the CPU first.
//
// Per (i, r): two 8-lane fp32 accumulators; of a block's four 8-element quarters, quarters
// 0 and 2 go to acc0 and quarters 1 and 3 to acc1, in that order, one fused multiply-add each.
// At the end y = hsum(acc0 + acc1) by a fixed tree. A partial last block (plain dtypes only)
// is decoded into a zero-padded stack block and goes the same way.
// GCC 12 reports the intrinsics' own `__Y = __Y` placeholders as (maybe-)uninitialized once
// they are inlined into target-attributed code; the warning is a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>

#include "core/check.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/internal/target.h"

namespace densa::matmul_internal {
namespace {

// Decoders: block b (elements 32b .. 32b+31) of a weight row as four fp32 vectors.
struct F32Block {
  DENSA_TARGET_AVX2_F16C_INLINE static void decode(const uint8_t* row, int64_t b, __m256 wq[4]) {
    const float* p = reinterpret_cast<const float*>(row) + b * 32;
    for (int q = 0; q < 4; ++q) wq[q] = _mm256_loadu_ps(p + 8 * q);
  }
};

struct F16Block {
  DENSA_TARGET_AVX2_F16C_INLINE static void decode(const uint8_t* row, int64_t b, __m256 wq[4]) {
    const uint8_t* p = row + b * 64;
    for (int q = 0; q < 4; ++q) {
      wq[q] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * q)));
    }
  }
};

struct BF16Block {
  DENSA_TARGET_AVX2_F16C_INLINE static void decode(const uint8_t* row, int64_t b, __m256 wq[4]) {
    const uint8_t* p = row + b * 64;
    for (int q = 0; q < 4; ++q) {
      const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * q)));
      wq[q] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
  }
};

DENSA_TARGET_AVX2_F16C_INLINE float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

struct Q8_0Block {
  DENSA_TARGET_AVX2_F16C_INLINE static void decode(const uint8_t* row, int64_t b, __m256 wq[4]) {
    const uint8_t* blk = row + b * 34;
    const __m256 d = _mm256_set1_ps(load_f16(blk));
    for (int q = 0; q < 4; ++q) {
      const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + 8 * q)));
      wq[q] = _mm256_mul_ps(_mm256_cvtepi32_ps(v), d);
    }
  }
};

// Bytes 0..7 / 8..15: low nibbles are elements 0..7 / 8..15, high nibbles 16..23 / 24..31.
// d * q - 8 * d equals d * (q - 8) exactly (see matmul/matmul_avx512.cpp).
struct Q4_0Block {
  DENSA_TARGET_AVX2_F16C_INLINE static void decode(const uint8_t* row, int64_t b, __m256 wq[4]) {
    const uint8_t* blk = row + b * 18;
    const float df = load_f16(blk);
    const __m256 d = _mm256_set1_ps(df);
    const __m256 m8d = _mm256_set1_ps(-8.0f * df);
    const __m256i mask = _mm256_set1_epi32(0x0f);
    const __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2)));
    const __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 10)));
    wq[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b0, mask)), d, m8d);
    wq[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b1, mask)), d, m8d);
    wq[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b0, 4)), d, m8d);
    wq[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b1, 4)), d, m8d);
  }
};

// Fixed tree: (lo128 + hi128), then lanes (0+2, 1+3), then (0 + 1).
DENSA_TARGET_AVX2_F16C_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class Block, int R, int NX>
DENSA_TARGET_AVX2_F16C_INLINE void tile(const WeightView& w, int64_t r0, const float* x, int64_t i0, float* y) {
  const int64_t cols = w.cols;
  const int64_t num_full = cols / kBlockElems;
  const int64_t tail = cols % kBlockElems;
  const uint8_t* rp[R];
  const float* xp[NX];
  for (int r = 0; r < R; ++r) rp[r] = w.row_ptr(r0 + r);
  for (int i = 0; i < NX; ++i) xp[i] = x + (i0 + i) * cols;
  __m256 acc[R][NX][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) acc[r][i][0] = acc[r][i][1] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < num_full; ++b) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m256 wq[4];
      Block::decode(rp[r], b, wq);
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const float* xb = xp[i] + b * 32;
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          acc[r][i][q & 1] = _mm256_fmadd_ps(wq[q], _mm256_loadu_ps(xb + 8 * q), acc[r][i][q & 1]);
        }
      }
    }
  }
  if (tail != 0) {
    alignas(32) float xt[NX][kBlockElems] = {};
    for (int i = 0; i < NX; ++i) std::memcpy(xt[i], xp[i] + num_full * 32, static_cast<size_t>(tail) * 4);
    for (int r = 0; r < R; ++r) {
      alignas(32) float wt[kBlockElems] = {};
      decode_elems(w.dtype, rp[r], num_full * 32, tail, wt);
      for (int i = 0; i < NX; ++i) {
        for (int q = 0; q < 4; ++q) {
          acc[r][i][q & 1] = _mm256_fmadd_ps(_mm256_load_ps(wt + 8 * q), _mm256_load_ps(xt[i] + 8 * q), acc[r][i][q & 1]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) y[(i0 + i) * w.rows + r0 + r] = hsum(_mm256_add_ps(acc[r][i][0], acc[r][i][1]));
  }
}

template <class Block, int R, int NX>
DENSA_TARGET_AVX2_F16C void x_tiles(const WeightView& w, int64_t r0, const float* x, int64_t i0, int64_t n, float* y) {
  for (; i0 + NX <= n; i0 += NX) tile<Block, R, NX>(w, r0, x, i0, y);
  if constexpr (NX > 1) {
    if (i0 < n) x_tiles<Block, R, NX - 1>(w, r0, x, i0, n, y);
  }
}

template <class Block, int R, int NX>
DENSA_TARGET_AVX2_F16C void row_tiles(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin,
                                      int64_t r_end) {
  int64_t r = r_begin;
  for (; r + R <= r_end; r += R) x_tiles<Block, R, NX>(w, r, x, 0, n, y);
  for (; r < r_end; ++r) x_tiles<Block, 1, NX>(w, r, x, 0, n, y);
}

// 16 ymm registers: decode uses 4 rows (8 accumulators + 4 decoded quarters); prefill uses
// 2 rows x 2 x rows (8 accumulators).
template <class Block>
DENSA_TARGET_AVX2_F16C void run(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin,
                                int64_t r_end) {
  if (n == 1) {
    row_tiles<Block, 4, 1>(w, x, n, y, r_begin, r_end);
  } else {
    row_tiles<Block, 2, 2>(w, x, n, y, r_begin, r_end);
  }
}

}  // namespace

void matmul_rows_avx2(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin,
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
