#pragma once
// GGUF's 32-element legacy blocks beyond Q8_0 / Q4_0 (ggml types 3, 6, 7). Byte layouts:
//   Q4_1 (20 bytes): f16 d, f16 m, 16 bytes of nibbles;            value = q * d + m, q in [0, 15]
//   Q5_0 (22 bytes): f16 d, 4 bytes qh, 16 bytes of nibbles;        value = (q - 16) * d
//   Q5_1 (24 bytes): f16 d, f16 m, 4 bytes qh, 16 bytes of nibbles; value = q * d + m, q in [0, 31]
// Nibbles as in Q4_0: byte j's low nibble is element j, its high nibble element j + 16. The
// 5-bit types take bit j of the little-endian 32-bit qh as element j's fifth (high) bit.
// Dequantizers compute in fp32 in ggml's operation order (a product, then a separate sum), so
// their values are bit-equal to ggml's dequantize_row_*. `n` counts elements (a multiple of 32).
#include <cstdint>

namespace densa {

void dequantize_q4_1(const uint8_t* blocks, int64_t n, float* out);
void dequantize_q5_0(const uint8_t* blocks, int64_t n, float* out);
void dequantize_q5_1(const uint8_t* blocks, int64_t n, float* out);

// Reference quantizers with ggml's reference rounding (so a file written here holds the blocks
// ggml's quantize_row_*_ref writes): Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), m = min,
// q = trunc((x - min) / d + 0.5); Q5_0: d = m / -16 for the signed element m of largest
// magnitude, q = min(31, trunc(x / d + 16.5)). in: [n], out: n / 32 blocks.
void quantize_row_q4_1(const float* in, int64_t n, uint8_t* out);
void quantize_row_q5_0(const float* in, int64_t n, uint8_t* out);
void quantize_row_q5_1(const float* in, int64_t n, uint8_t* out);

}  // namespace densa
