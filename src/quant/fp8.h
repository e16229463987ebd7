#pragma once
// OCP FP8 e4m3fn codec (the KV-cache and FP8-weight element format).
// Bias 7, 3 mantissa bits, no infinities: 0x7f / 0xff are NaN, the largest finite value is
// 448 (0x7e), the smallest subnormal 2^-9. Encoding saturates to +-448, rounds to nearest
// even (subnormals included) and maps NaN to 0x7f. Decoding is exact.
#include <cstdint>
#include <span>

namespace densa {

inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr uint8_t kFp8E4M3NaN = 0x7f;

uint8_t fp8_e4m3_from_f32(float x);
float fp8_e4m3_to_f32(uint8_t code);
// The 256 decoded values, indexed by code (NaN codes hold a quiet NaN).
const float* fp8_e4m3_decode_table();

// Bulk encode: out[i] = fp8(in[i] / scale). Precondition: scale > 0, out.size() == in.size().
void fp8_e4m3_encode(std::span<const float> in, float scale, std::span<uint8_t> out);
// Bulk decode: out[i] = fp8_to_f32(in[i]) * scale. Precondition: out.size() == in.size().
void fp8_e4m3_decode(std::span<const uint8_t> in, float scale, std::span<float> out);

}  // namespace densa
