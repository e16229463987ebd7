#include "quant/ggml_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace densa {

void quantize_row_q8_0(const float* in, int64_t cols, uint8_t* out) {
  CHECK(cols % 32 == 0) << "q8_0: cols " << cols;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* x = in + b * 32;
    uint8_t* blk = out + b * 34;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(blk, &dh, 2);
    for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
  }
}

void quantize_row_q4_0(const float* in, int64_t cols, uint8_t* out) {
  CHECK(cols % 32 == 0) << "q4_0: cols " << cols;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* x = in + b * 32;
    uint8_t* blk = out + b * 18;
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        m = x[j];
      }
    }
    const float d = m / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(blk, &dh, 2);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      blk[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

}  // namespace densa
