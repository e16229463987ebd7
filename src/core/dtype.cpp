#include "core/dtype.h"

#include <cmath>

namespace densa {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kFP8E4M3: return "fp8_e4m3";
    case DType::kI4: return "int4";
    case DType::kI8: return "i8";
    case DType::kI32: return "i32";
    case DType::kU8: return "u8";
    case DType::kA8G32: return "a8g32";
    case DType::kA4G32: return "a4g32";
    case DType::kA4IQ4: return "a4iq4";
    case DType::kA4MXFP4: return "a4mxfp4";
    case DType::kA8K16: return "a8k16";
    case DType::kA8K32: return "a8k32";
    case DType::kA4K: return "a4k";
    case DType::kA4KIQ4: return "a4kiq4";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                  DType::kFP8E4M3, DType::kI4, DType::kI8, DType::kI32, DType::kU8, DType::kA8G32, DType::kA4G32,
                  DType::kA4IQ4, DType::kA4MXFP4, DType::kA8K16, DType::kA8K32, DType::kA4K, DType::kA4KIQ4}) {
    if (dtype_name(t) == name) return t;
  }
  if (name == "fp8") return DType::kFP8E4M3;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    // zero or subnormal: man * 2^-24
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f) {
  const uint32_t b = bits_from_f32(f);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // subnormal f16 (or zero): value / 2^-24, rounded to nearest even
    const float scaled = std::ldexp(f32_from_bits(abs), 24);
    const float r = std::nearbyint(scaled);  // default rounding mode: nearest-even
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t m = abs + 0xfffu + ((abs >> 13) & 1u);  // round mantissa to 10 bits, nearest even
  return sign | static_cast<uint16_t>(((m >> 13) - (112u << 10)) & 0xffffu);
}

}  // namespace densa
