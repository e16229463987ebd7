#include "quant/fp8.h"

#include <algorithm>
#include <array>
#include <bit>

#include "core/check.h"

namespace densa {
namespace {

constexpr float decode_code(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t exp = (code >> 3) & 0xfu;
  const uint32_t man = code & 0x7u;
  if (exp == 0xfu && man == 0x7u) return std::bit_cast<float>(sign | 0x7fc00000u);
  if (exp == 0) {
    // Subnormal: man * 2^-9 (exact in f32).
    const float v = static_cast<float>(man) * (1.0f / 512.0f);
    return sign ? -v : v;
  }
  // Normal: rebias 7 -> 127 and widen the mantissa from 3 to 23 bits.
  return std::bit_cast<float>(sign | ((exp + 120u) << 23) | (man << 20));
}

constexpr std::array<float, 256> make_decode_table() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = decode_code(static_cast<uint8_t>(c));
  return t;
}

constexpr std::array<float, 256> kDecodeTable = make_decode_table();

// Branch-free so loops over it vectorize. Both candidate encodings are computed and one is
// selected; see fp8.h for the contract.
inline uint8_t encode_one(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs_bits = bits & 0x7fffffffu;
  const bool is_nan = abs_bits > 0x7f800000u;
  // Saturate: every |x| > 448 (infinity included) becomes 448.
  const uint32_t clamped = std::min(abs_bits, 0x43e00000u);  // 448.0f

  // Normal range [2^-6, 448]: rebias the exponent (127 -> 7), then round the 23-bit
  // mantissa to 3 bits, nearest-even; a carry moves into the exponent as it should.
  const uint32_t rebiased = clamped - (120u << 23);
  const uint32_t lsb = (rebiased >> 20) & 1u;
  const uint32_t normal = (rebiased + 0x7ffffu + lsb) >> 20;

  // Subnormal range [0, 2^-6): in [2^14, 2^15) one f32 ulp is 2^-9, the e4m3 subnormal
  // step, so adding 2^14 rounds |x| to a multiple of 2^-9 (nearest-even, the default FP
  // rounding mode); the low mantissa bits are then the code (0..8, 8 = smallest normal).
  const float magic = 16384.0f;
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(clamped) + magic) -
                       std::bit_cast<uint32_t>(magic);

  // Selects by masks rather than branches so the loop if-converts and vectorizes.
  const uint32_t normal_mask = 0u - static_cast<uint32_t>(clamped >= 0x3c800000u);  // 2^-6
  const uint32_t mag = sub ^ ((sub ^ normal) & normal_mask);
  const uint32_t nan_mask = 0u - static_cast<uint32_t>(is_nan);
  const uint32_t code = (sign | mag) ^ (((sign | mag) ^ kFp8E4M3NaN) & nan_mask);
  return static_cast<uint8_t>(code);
}

}  // namespace

uint8_t fp8_e4m3_from_f32(float x) { return encode_one(x); }

float fp8_e4m3_to_f32(uint8_t code) { return kDecodeTable[code]; }

const float* fp8_e4m3_decode_table() { return kDecodeTable.data(); }

void fp8_e4m3_encode(std::span<const float> in, float scale, std::span<uint8_t> out) {
  DCHECK(scale > 0.0f) << "fp8 encode scale " << scale;
  DCHECK(in.size() == out.size()) << "fp8 encode: span sizes differ";
  const size_t n = in.size();
  const float* src = in.data();
  uint8_t* dst = out.data();
  for (size_t i = 0; i < n; ++i) dst[i] = encode_one(src[i] / scale);
}

void fp8_e4m3_decode(std::span<const uint8_t> in, float scale, std::span<float> out) {
  DCHECK(in.size() == out.size()) << "fp8 decode: span sizes differ";
  const size_t n = in.size();
  const uint8_t* src = in.data();
  float* dst = out.data();
  for (size_t i = 0; i < n; ++i) dst[i] = kDecodeTable[src[i]] * scale;
}

}  // namespace densa
