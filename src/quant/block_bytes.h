#pragma once
// Little-endian fields of quantized blocks at any byte offset (GGUF blocks pack their f16
// scales and bit masks unaligned): loaded and stored through memcpy, so no read assumes an
// alignment the block does not have.
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace densa::block_bytes {

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

inline void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace densa::block_bytes
