#pragma once
// The GGUF tensor types densa converts at load: for each ggml type id its block geometry, the
// reference dequantizer (bit-equal to ggml's) and a simple reference quantizer (for test and
// tool files). F32 / F16 / BF16 / Q8_0 / Q4_0 are densa DTypes (core/dtype.h) and are not here.
//   id  name     block  bytes  file
//    3  q4_1       32     20   quant/ggml_legacy.h
//    6  q5_0       32     22   quant/ggml_legacy.h
//    7  q5_1       32     24   quant/ggml_legacy.h
//   10  q2_K      256     84   quant/ggml_kquants.h
//   11  q3_K      256    110   quant/ggml_kquants.h
//   12  q4_K      256    144   quant/ggml_kquants.h
//   13  q5_K      256    176   quant/ggml_kquants.h
//   14  q6_K      256    210   quant/ggml_kquants.h
//   20  iq4_nl     32     18   quant/ggml_iq4.h
//   23  iq4_xs    256    136   quant/ggml_iq4.h
//   39  mxfp4      32     17   quant/mxfp4.h
#include <cstdint>
#include <span>

namespace densa {

namespace ggml_type {
inline constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8;
inline constexpr uint32_t kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14;
inline constexpr uint32_t kIQ4_NL = 20, kIQ4_XS = 23, kBF16 = 30, kMXFP4 = 39;
}  // namespace ggml_type

struct GgmlBlockFormat {
  uint32_t type;
  const char* name;     // ggml's name ("q4_K")
  int64_t block_elems;
  int64_t block_bytes;
  // n elements (a multiple of block_elems) from n / block_elems blocks.
  void (*dequantize)(const uint8_t* blocks, int64_t n, float* out);
  void (*quantize)(const float* in, int64_t n, uint8_t* out);
  double bits_per_weight() const { return 8.0 * static_cast<double>(block_bytes) / static_cast<double>(block_elems); }
};

// Every format above, in id order.
std::span<const GgmlBlockFormat> ggml_block_formats();
// The format of ggml type `type`, or nullptr when it is not one of these.
const GgmlBlockFormat* ggml_block_format(uint32_t type);

}  // namespace densa
