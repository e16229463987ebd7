// Activation preparation of the AVX-512 quantized matmul (kernels/internal/
// matmul_quant_avx512_kernels.h): x rounded once per call into the layout each kernel reads.
//
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
//  - AMX tiles (FP8, BF16, F16): per token tile of 16 x rows (1 in decode), per 32 columns, one
//    B tile in the VNNI layout tdpbf16ps reads (prepare_x_amx_rows).

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <cmath>
#include <cstring>

#include "kernels/internal/matmul_quant_avx512_kernels.h"

namespace densa::matmul_internal {
namespace {

// bf16(x) (round to nearest even, as f32_to_bf16) in the per-64 order described at the top.
DENSA_TARGET_AVX512_QUANT void prepare_x_fp8(const float* x, int64_t cols, uint8_t* out) {
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

// activation_q8_quantize (same fp32 operations, so the same q and scales) of the 32 elements
// from `at` (zeros past cols): their scale in *sx and, when it is a number other than zero, q in
// q0 (elements 0-15) and q1 (16-31) as int32, returning true. A block with a NaN or an infinity
// (scale NaN), all zeros or too small for 127 / amax (scale 0) returns false: its q are zero.
DENSA_TARGET_AVX512_QUANT_INLINE bool quantize_x32(const float* x, int64_t cols, int64_t at, float* sx, __m512i& q0,
                                                   __m512i& q1) {
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  const __m512 v0 = _mm512_maskz_loadu_ps(float_mask(cols - at), x + at);
  const __m512 v1 = _mm512_maskz_loadu_ps(float_mask(cols - at - 16), x + at + 16);
  const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
  const __mmask16 bad = _mm512_cmp_ps_mask(a0, inf, _CMP_NLT_UQ) | _mm512_cmp_ps_mask(a1, inf, _CMP_NLT_UQ);
  const float m = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1)), inv_m = 127.0f / m;
  if (bad != 0 || !std::isfinite(inv_m)) {
    *sx = bad != 0 ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    return false;
  }
  const __m512 inv = _mm512_set1_ps(inv_m);
  *sx = m / 127.0f;
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  q0 = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v0, inv)), hi), lo);  // half to even
  q1 = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v1, inv)), hi), lo);
  return true;
}

// quantize_x32 as int8 at q (32 bytes, zeros for a block without a scale).
DENSA_TARGET_AVX512_QUANT_INLINE bool quantize_x32_to(const float* x, int64_t cols, int64_t at, int8_t* q, float* sx,
                                                      __m512i& q0, __m512i& q1) {
  if (!quantize_x32(x, cols, at, sx, q0, q1)) {
    std::memset(q, 0, 32);
    return false;
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtepi32_epi8(q1));
  return true;
}

// The 128 elements from k0 (zeros past cols): q[128] and the four block scales sx[4].
DENSA_TARGET_AVX512_QUANT_INLINE void quantize_x128(const float* x, int64_t cols, int64_t k0, int8_t* q, float* sx) {
  for (int b = 0; b < 4; ++b) {
    __m512i q0, q1;
    quantize_x32_to(x, cols, k0 + 32 * b, q + 32 * b, sx + b, q0, q1);
  }
}

// The 256 bytes of one prepared INT4 or INT8 step: the int8 vectors a and b (32-bit lane l of
// each holds elements of x block l / 4 only), lane l's x scale, and `offset` (the weight codes'
// unsigned offset, negated) times the lane's sum of q over a and b: the start of its int32 sums.
DENSA_TARGET_AVX512_QUANT_INLINE void store_x_step(uint8_t* out, __m512i a, __m512i b, const float* sx, int32_t offset) {
  const __m512i lane_block = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i lane_sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, a), ones, b);
  _mm512_storeu_si512(out, a);
  _mm512_storeu_si512(out + 64, b);
  _mm512_storeu_ps(out + 128, _mm512_permutexvar_ps(lane_block, _mm512_castps128_ps512(_mm_loadu_ps(sx))));
  _mm512_storeu_si512(out + 192, _mm512_mullo_epi32(lane_sum, _mm512_set1_epi32(offset)));
}

// quantize_x128 in the per-128 layout described at the top.
DENSA_TARGET_AVX512_QUANT void prepare_x_int4(const float* x, int64_t cols, uint8_t* out) {
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
DENSA_TARGET_AVX512_QUANT void prepare_x_int8(const float* x, int64_t cols, uint8_t* out) {
  for (int64_t k0 = 0; k0 < cols; k0 += kInt8Step, out += kInt8StepBytes) {
    alignas(64) int8_t q[kInt8Step];
    alignas(16) float sx[4];
    quantize_x128(x, cols, k0, q, sx);
    __m512i first, second;
    int8_regroup(_mm512_load_si512(q), _mm512_load_si512(q + 64), first, second);
    store_x_step(out, first, second, sx, -128);
  }
}

// quantize_x128 (the same q and scales as every other W8A8 / W4A8 path) as row i of the 16-row
// tiles' blocks (int8t_x_row). cols % 128 == 0 (int8_group_tileable).

// One group at a time, written in place: quantize_x32's q stored at the group's slot of the
// block, and 128 * their sum (exact: 32 terms of |q| <= 127) taken from the int32 values.
DENSA_TARGET_AVX512_QUANT void prepare_x_int8t(const float* x, int64_t cols, uint8_t* xp, int64_t i) {
  const Int8tXRow row = int8t_x_row(xp, int8t_x_stride(cols), cols, i);
  auto* q = reinterpret_cast<int8_t*>(const_cast<int32_t*>(row.q));
  auto* sx = const_cast<float*>(row.xs);
  auto* corr = const_cast<int32_t*>(row.xc);
  for (int64_t g = 0; g < cols / 32; ++g) {
    __m512i q0, q1;
    corr[g] = quantize_x32_to(x, cols, 32 * g, q + g * 512, sx + g, q0, q1)
                  ? 128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1))
                  : 0;
  }
}

// One x row as prepare_x_fp8 writes it, or with repeat (F16 weights, amx_cols) every 128-byte
// step written twice in a row: out holds fp8_x_stride(cols) bytes, twice that with repeat.
DENSA_TARGET_AVX512_QUANT void prepare_x_amx_row(const float* x, int64_t cols, bool repeat, uint8_t* out,
                                                 WorkerScratch& ws) {
  if (!repeat) return prepare_x_fp8(x, cols, out);
  uint8_t* once = ws.bytes(kernels_internal::kSlotPrepareOnce, static_cast<size_t>(fp8_x_stride(cols)));
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
DENSA_TARGET_AVX512_QUANT void prepare_x_amx_rows(const float* x, int64_t n, int64_t cols, bool repeat, int64_t i_begin,
                                                  int64_t i_end, uint8_t* xp, WorkerScratch& ws) {
  if (n == 1) {  // one token: B row p is pair p of the step, which is prepare_x_fp8's own layout
    prepare_x_amx_row(x, cols, repeat, xp, ws);
    return;
  }
  const int64_t row_bytes = fp8_x_stride(cols) * (repeat ? 2 : 1);
  const int64_t q_steps = row_bytes / 64;
  uint8_t* row = ws.bytes(kernels_internal::kSlotPrepareRow, static_cast<size_t>(row_bytes));
  const __m512i pair_to_dword = _mm512_set_epi32(240, 224, 208, 192, 176, 160, 144, 128, 112, 96, 80, 64, 48, 32, 16, 0);
  const int64_t i_stop = i_end == n ? (n + 15) / 16 * 16 : i_end;
  for (int64_t i = i_begin; i < i_stop; ++i) {
    if (i < n) prepare_x_amx_row(x + i * cols, cols, repeat, row, ws);
    uint8_t* tile0 = xp + (i / 16) * q_steps * kAmxTileBytes + (i % 16) * 4;
    for (int64_t q = 0; q < q_steps; ++q) {
      const __m512i v = i < n ? _mm512_load_si512(row + q * 64) : _mm512_setzero_si512();
      _mm512_i32scatter_epi32(tile0 + q * kAmxTileBytes, pair_to_dword, v, 4);
    }
  }
}

}  // namespace

DENSA_TARGET_AVX512_QUANT void activation_q8_quantize_avx512(const float* x, int64_t cols, int8_t* q, float* sx) {
  CHECK(cols % 128 == 0) << "activation_q8_quantize_avx512: cols " << cols;
  for (int64_t k0 = 0; k0 < cols; k0 += 128) quantize_x128(x, cols, k0, q + k0, sx + k0 / 32);
}

int64_t matmul_quant_avx512_x_bytes(const WeightView& w, int64_t n) {
  if (quant_on_amx(w)) return amx_x_bytes(w, n);
  if (w.layout == WeightLayout::kInt8Tiles16 || w.layout == WeightLayout::kInt4Tiles16) return int8t_x_bytes(w.cols, n);
  return n * x_stride(w);
}

void matmul_quant_avx512_prepare(const WeightView& w, const float* x, int64_t n, uint8_t* xp, WorkerScratch& ws) {
  matmul_quant_avx512_prepare_rows(w, x, n, 0, n, xp, ws);
}

void matmul_quant_avx512_prepare_rows(const WeightView& w, const float* x, int64_t n, int64_t i_begin, int64_t i_end,
                                      uint8_t* xp, WorkerScratch& ws) {
  CHECK(matmul_quant_avx512_supports(w)) << "matmul avx512 quant: dtype " << dtype_name(w.dtype)
                                         << ", scale block " << w.scale_rows << "x" << w.scale_cols;
  CHECK(reinterpret_cast<uintptr_t>(xp) % 64 == 0) << "matmul avx512 quant: unaligned activations";
  CHECK(0 <= i_begin && i_begin <= i_end && i_end <= n) << "matmul avx512 quant: rows " << i_begin << ".." << i_end;
  if (quant_on_amx(w)) return prepare_x_amx_rows(x, n, w.cols, w.dtype == DType::kF16, i_begin, i_end, xp, ws);
  const int64_t stride = x_stride(w);
  for (int64_t i = i_begin; i < i_end; ++i) {
    if (w.dtype == DType::kFP8E4M3) {
      prepare_x_fp8(x + i * w.cols, w.cols, xp + i * stride);
    } else if (w.layout == WeightLayout::kAffineTiles16) {
      affine_tiles_prepare_x(x + i * w.cols, w.cols, w.dtype, xp + i * stride);
    } else if (is_affine_rows(w.dtype)) {
      affine_prepare_x(x + i * w.cols, w.cols, w.dtype, xp + i * stride);
    } else if (w.layout == WeightLayout::kInt8Tiles16 || w.layout == WeightLayout::kInt4Tiles16) {
      prepare_x_int8t(x + i * w.cols, w.cols, xp, i);
      if (i + 1 == n) int8t_x_pad(w.cols, xp, n);
    } else if (w.dtype == DType::kI8) {
      prepare_x_int8(x + i * w.cols, w.cols, xp + i * stride);
    } else {
      prepare_x_int4(x + i * w.cols, w.cols, xp + i * stride);
    }
  }
}

bool matmul_quant_avx512_gathers(const WeightView& w) { return !quant_on_amx(w); }

void matmul_quant_avx512_gather_rows(const WeightView& w, const uint8_t* src, const int32_t* rows, int64_t n,
                                     int64_t i_begin, int64_t i_end, uint8_t* dst) {
  CHECK(matmul_quant_avx512_gathers(w)) << "matmul avx512 quant: the AMX layout's rows are not gathered";
  if (w.layout == WeightLayout::kInt8Tiles16 || w.layout == WeightLayout::kInt4Tiles16) {
    return int8t_x_gather(src, w.cols, rows, n, i_begin, i_end, dst);
  }
  const int64_t stride = x_stride(w);
  for (int64_t i = i_begin; i < i_end; ++i) std::memcpy(dst + i * stride, src + rows[i] * stride, static_cast<size_t>(stride));
}

}  // namespace densa::matmul_internal
