#pragma once
// GGUF K-quants (ggml types 10..14): super-blocks of 256 elements with per-sub-block scales.
// Byte layouts (all multi-byte fields little-endian, f16 = IEEE half):
//   Q2_K (84):  scales[16] (low nibble scale, high nibble min, per 16 elements), qs[64]
//               (2 bits), f16 d, f16 dmin.      value = d*sc * q - dmin*m, q in [0, 3]
//   Q3_K (110): hmask[32] (high bit), qs[64] (low 2 bits), scales[12] (16 x 6 bits, stored
//               +32), f16 d.                    value = d*(sc - 32) * (q - 4), q in [0, 7]
//   Q4_K (144): f16 d, f16 dmin, scales[12] (8 x (6-bit scale, 6-bit min), per 32 elements),
//               qs[128] (4 bits).               value = d*sc * q - dmin*m, q in [0, 15]
//   Q5_K (176): as Q4_K, then qh[32] (fifth bit) before qs[128]; q in [0, 31]
//   Q6_K (210): ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8, per 16
//               elements), f16 d.               value = d*sc * (q - 32), q in [0, 63]
// Element order inside a super-block (e in [0, 256)):
//   Q2_K / Q3_K: qs byte 32*(e/128) + e%32, bits 2*((e%128)/32); Q3_K's high bit is bit
//     4*(e/128) + (e%128)/32 of hmask[e%32]; scale e/16.
//   Q4_K / Q5_K: qs byte 32*(e/64) + e%32, the high nibble when (e%64) >= 32; Q5_K's fifth
//     bit is bit e/32 of qh[e%32]; scale/min e/32 (get_scale_min_k4 packing, see the .cpp).
//   Q6_K: ql byte 64*(e/128) + 32*(k&1) + e%32 with k = (e%128)/32, the high nibble when k >= 2;
//     high bits (qh[32*(e/128) + e%32] >> 2k) & 3; scale e/16.
// The dequantizers compute in fp32 in ggml's operation order (the sub-block factors d*sc and
// dmin*m first, then one product and one difference), so their values are bit-equal to ggml's
// dequantize_row_*. `n` counts elements (a multiple of 256).
#include <cstdint>

namespace densa {

void dequantize_q2_k(const uint8_t* blocks, int64_t n, float* out);
void dequantize_q3_k(const uint8_t* blocks, int64_t n, float* out);
void dequantize_q4_k(const uint8_t* blocks, int64_t n, float* out);
void dequantize_q5_k(const uint8_t* blocks, int64_t n, float* out);
void dequantize_q6_k(const uint8_t* blocks, int64_t n, float* out);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block's 12 scale bytes.
void kquant_scale_min(const uint8_t* scales12, int j, int& scale, int& min);
// The 6-bit scale (0..63, stored +32) of sub-block j (0..15) of Q3_K's 12 scale bytes.
int q3_k_scale(const uint8_t* scales12, int j);

}  // namespace densa
