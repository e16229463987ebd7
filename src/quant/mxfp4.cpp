#include "quant/mxfp4.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/dtype.h"

namespace densa {

float mxfp4_half_scale(uint8_t e) {
  // 2^(e-128): exponent field e - 1 for e >= 2, else the subnormals with bit 21 or 22 set.
  const uint32_t bits = e < 2 ? (uint32_t{0x00200000} << e) : (static_cast<uint32_t>(e) - 1) << 23;
  return f32_from_bits(bits);
}

void dequantize_mxfp4(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = blocks + b * 17;
    const float d = mxfp4_half_scale(blk[0]);
    float* y = out + b * 32;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(kMxfp4Grid[blk[1 + j] & 0x0f]) * d;
      y[j + 16] = static_cast<float>(kMxfp4Grid[blk[1 + j] >> 4]) * d;
    }
  }
}

void quantize_row_mxfp4(const float* in, int64_t n, uint8_t* out) {
  CHECK(n % 32 == 0) << "mxfp4: n " << n;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* x = in + b * 32;
    uint8_t* blk = out + b * 17;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    int e = 0;
    while (e < 255 && 12.0f * mxfp4_half_scale(static_cast<uint8_t>(e)) < amax) ++e;
    blk[0] = static_cast<uint8_t>(e);
    const float d = mxfp4_half_scale(static_cast<uint8_t>(e));
    for (int j = 0; j < 32; ++j) {
      int best = 0;
      float err = std::fabs(x[j]);
      for (int k = 1; k < 16; ++k) {
        const float v = static_cast<float>(kMxfp4Grid[k]) * d;
        if (std::fabs(v - x[j]) < err) {
          err = std::fabs(v - x[j]);
          best = k;
        }
      }
      if (j < 16) blk[1 + j] = static_cast<uint8_t>(best);
      else blk[1 + j - 16] |= static_cast<uint8_t>(best << 4);
    }
  }
}

}  // namespace densa
