#pragma once
// Simple reference quantizers for the K-quants (layouts in quant/ggml_kquants.h), for writing
// test and tool files. Not ggml's quantizers (no error-minimizing search, no importance
// matrix): they choose scales so that no element is clipped, then round every element to its
// nearest level, which gives a provable error bound:
//   with mins (Q2_K, Q4_K, Q5_K): sub-block range [lo, hi] with lo = min(min x, 0), hi =
//     max(max x, 0). The min code m = ceil(-lo / dmin) and the scale code sc = ceil((hi +
//     dmin*m) / nmax / d), both against f16 super-block factors rounded up, so the levels
//     d*sc*q - dmin*m span [lo, hi] with step d*sc <= (hi - lo + dmin) / nmax + d:
//     |error| <= step / 2.
//   symmetric (Q3_K, Q6_K): sc = ceil(amax / qpos / d) with qpos = 3 (Q3_K, levels -4..3) or
//     31 (Q6_K, -32..31): step d*sc <= amax / qpos + d, |error| <= step / 2.
// in: [n], out: n / 256 super-blocks. Precondition: n % 256 == 0.
#include <cstdint>

namespace densa {

void quantize_row_q2_k(const float* in, int64_t n, uint8_t* out);
void quantize_row_q3_k(const float* in, int64_t n, uint8_t* out);
void quantize_row_q4_k(const float* in, int64_t n, uint8_t* out);
void quantize_row_q5_k(const float* in, int64_t n, uint8_t* out);
void quantize_row_q6_k(const float* in, int64_t n, uint8_t* out);

}  // namespace densa
