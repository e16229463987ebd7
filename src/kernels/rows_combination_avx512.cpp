// AVX-512 rows_combination (see kernels/internal/rows_combination_isa.h). Built for baseline
// x86-64 with a target attribute; only runs when the dispatcher has checked the CPU.
//
// Columns go in blocks of 256 (16 accumulators); per block, every row of x walks the rows of w
// in order, so a block of w (rows x 1 KiB) stays in cache for the next row of x, and each
// w row segment is read contiguously. A last partial block takes its whole vectors in one pass
// (as many accumulators), then one masked vector. A matrix of 128 columns is one pass over
// contiguous memory. Every lane sums its terms in row order with one fma each, as the
// scalar loop does.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/internal/rows_combination_isa.h"
#include "kernels/internal/target.h"

namespace densa::rows_combination_internal {
namespace {

constexpr int kLanes = 16;
constexpr int kBlockVectors = 16;

// y[c0, c0 + 16 * kVectors) for one row of x.
template <int kVectors>
DENSA_TARGET_AVX512_FMA inline void block(const float* w, int64_t rows, int64_t cols, int64_t c0, const float* xt, float* yt) {
  __m512 acc[kVectors];
  for (int v = 0; v < kVectors; ++v) acc[v] = _mm512_setzero_ps();
  const float* wr = w + c0;
  for (int64_t r = 0; r < rows; ++r, wr += cols) {
    const __m512 xr = _mm512_set1_ps(xt[r]);
    for (int v = 0; v < kVectors; ++v) acc[v] = _mm512_fmadd_ps(xr, _mm512_loadu_ps(wr + v * kLanes), acc[v]);
  }
  for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(yt + c0 + v * kLanes, acc[v]);
}

DENSA_TARGET_AVX512_FMA void masked_vector(const float* w, int64_t rows, int64_t cols, int64_t c0, __mmask16 mask, const float* xt,
                                           float* yt) {
  __m512 acc = _mm512_setzero_ps();
  const float* wr = w + c0;
  for (int64_t r = 0; r < rows; ++r, wr += cols) {
    acc = _mm512_fmadd_ps(_mm512_set1_ps(xt[r]), _mm512_maskz_loadu_ps(mask, wr), acc);
  }
  _mm512_mask_storeu_ps(yt + c0, mask, acc);
}

// The last whole vectors of a row (fewer than a block): one pass with that many accumulators.
template <int kVectors>
DENSA_TARGET_AVX512_FMA void rest(const float* w, int64_t rows, int64_t cols, int64_t c0, int vectors, const float* x,
                                  int64_t x_stride, int64_t n, float* y, int64_t y_stride) {
  if constexpr (kVectors > 0) {
    if (vectors == kVectors) {
      for (int64_t t = 0; t < n; ++t) block<kVectors>(w, rows, cols, c0, x + t * x_stride, y + t * y_stride);
      return;
    }
    rest<kVectors - 1>(w, rows, cols, c0, vectors, x, x_stride, n, y, y_stride);
  }
}

}  // namespace

DENSA_TARGET_AVX512_FMA void rows_combination_avx512(const float* w, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
                                                     int64_t n, float* y, int64_t y_stride) {
  constexpr int64_t kBlock = kBlockVectors * kLanes;
  int64_t c0 = 0;
  for (; c0 + kBlock <= cols; c0 += kBlock) {
    for (int64_t t = 0; t < n; ++t) block<kBlockVectors>(w, rows, cols, c0, x + t * x_stride, y + t * y_stride);
  }
  if (const int vectors = static_cast<int>((cols - c0) / kLanes); vectors > 0) {
    rest<kBlockVectors - 1>(w, rows, cols, c0, vectors, x, x_stride, n, y, y_stride);
    c0 += int64_t{vectors} * kLanes;
  }
  if (c0 < cols) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (cols - c0)) - 1);
    for (int64_t t = 0; t < n; ++t) masked_vector(w, rows, cols, c0, mask, x + t * x_stride, y + t * y_stride);
  }
}

}  // namespace densa::rows_combination_internal
