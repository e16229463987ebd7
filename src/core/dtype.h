#pragma once
// Element types densa stores, and the scalar conversions every kernel and reader shares.
// Block-quantized types (Q8_0, Q4_0, FP8 block-scaled, INT4 group-wise) describe how a row of
// `cols` logical elements is laid out in bytes; see dtype_row_bytes().
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace densa {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,     // GGUF: blocks of 32 = f16 scale + 32 x int8 (34 bytes)
  kQ4_0,     // GGUF: blocks of 32 = f16 scale + 16 bytes of nibbles (18 bytes), value = (q - 8) * d
  kFP8E4M3,  // OCP e4m3fn, one byte; scales live beside the tensor
  kI4,       // signed int4 group-wise, packed two per byte; scales live beside the tensor
  kI8,
  kI32,
  kU8,
  // GGUF K-quants, IQ4 and MXFP4 repacked at load (quant/affine_rows.h has the layouts and
  // which format becomes which), rows of 128-column blocks holding the codes and then the
  // scales and mins of groups of 32 (16: kA8K16); value = code * scale + min, exact.
  // Per-group fp32 scale and min: kA8G32 (8-bit codes, 160 bytes per block), kA4G32 (4-bit
  // linear), kA4IQ4 (4-bit, IQ4's grid), kA4MXFP4 (4-bit, MXFP4's levels) (96 bytes).
  // K-quant form, scale = D * s and min = M * m with fp32 D, M per block and int8 s, m per
  // group: kA8K16 (152 bytes), kA8K32 (144), kA4K (4-bit linear, 80), kA4KIQ4 (4-bit IQ4, 80).
  kA8G32,
  kA4G32,
  kA4IQ4,
  kA4MXFP4,
  kA8K16,
  kA8K32,
  kA4K,
  kA4KIQ4,
};

std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

// Logical elements per storage block (1 for plain types). Inline: row_ptr() calls it per row
// inside the GEMV kernels.
constexpr int64_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0: return 32;
    case DType::kI4: return 2;
    case DType::kA8G32:
    case DType::kA4G32:
    case DType::kA4IQ4:
    case DType::kA4MXFP4:
    case DType::kA8K16:
    case DType::kA8K32:
    case DType::kA4K:
    case DType::kA4KIQ4: return 128;
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kFP8E4M3:
    case DType::kI8:
    case DType::kI32:
    case DType::kU8: return 1;
  }
  return 1;
}

// Bytes per storage block.
constexpr int64_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kQ8_0: return 34;
    case DType::kQ4_0: return 18;
    case DType::kFP8E4M3: return 1;
    case DType::kI4: return 1;
    case DType::kI8: return 1;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
    case DType::kA8G32: return 160;
    case DType::kA4G32:
    case DType::kA4IQ4:
    case DType::kA4MXFP4: return 96;
    case DType::kA8K16: return 152;
    case DType::kA8K32: return 144;
    case DType::kA4K:
    case DType::kA4KIQ4: return 80;
  }
  return 1;
}

// Bytes of one row of `cols` elements; cols must be a multiple of the block size.
constexpr int64_t dtype_row_bytes(DType t, int64_t cols) {
  return cols / dtype_block_elems(t) * dtype_block_bytes(t);
}

// ---- scalar conversions (exact, round-to-nearest-even where they narrow) ----

inline float f32_from_bits(uint32_t b) { return std::bit_cast<float>(b); }
inline uint32_t bits_from_f32(float f) { return std::bit_cast<uint32_t>(f); }

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t b = bits_from_f32(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40);  // quiet NaN
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace densa
