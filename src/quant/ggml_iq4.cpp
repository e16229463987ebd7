#include "quant/ggml_iq4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"
#include "quant/block_bytes.h"

namespace densa {
namespace {

using block_bytes::load_f16;

// 32 elements of IQ4_NL-ordered nibbles (16 bytes) scaled by dl.
void dequantize_nibbles(const uint8_t* qs, float dl, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = dl * static_cast<float>(kIq4Grid[qs[j] & 0x0f]);
    y[j + 16] = dl * static_cast<float>(kIq4Grid[qs[j] >> 4]);
  }
}

int nearest_level(float v) {
  int best = 0;
  float err = std::fabs(v - kIq4Grid[0]);
  for (int k = 1; k < 16; ++k) {
    const float e = std::fabs(v - kIq4Grid[k]);
    if (e < err) {
      err = e;
      best = k;
    }
  }
  return best;
}

void quantize_nibbles(const float* x, float scale, uint8_t* qs) {
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int q0 = scale != 0.0f ? nearest_level(x[j] * inv) : 8;  // level 8 is 1: nearest to 0
    const int q1 = scale != 0.0f ? nearest_level(x[j + 16] * inv) : 8;
    qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// -m / 127 for the signed element m of largest magnitude among 32.
float signed_scale(const float* x) {
  float amax = 0.0f, m = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      m = x[j];
    }
  }
  return m / -127.0f;
}

}  // namespace

void dequantize_iq4_nl(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b) dequantize_nibbles(blocks + b * 18 + 2, load_f16(blocks + b * 18), out + b * 32);
}

void dequantize_iq4_xs(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = blocks + b * 136;
    const float d = load_f16(blk);
    uint16_t scales_h;
    std::memcpy(&scales_h, blk + 2, 2);
    for (int s = 0; s < 8; ++s) {
      const int ls = ((blk[4 + s / 2] >> (4 * (s % 2))) & 0x0f) | (((scales_h >> (2 * s)) & 3) << 4);
      dequantize_nibbles(blk + 8 + 16 * s, d * static_cast<float>(ls - 32), out + b * 256 + 32 * s);
    }
  }
}

void quantize_row_iq4_nl(const float* in, int64_t n, uint8_t* out) {
  CHECK(n % 32 == 0) << "iq4_nl: n " << n;
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t* blk = out + b * 18;
    const uint16_t dh = f32_to_f16(signed_scale(in + b * 32));
    std::memcpy(blk, &dh, 2);
    quantize_nibbles(in + b * 32, f16_to_f32(dh), blk + 2);
  }
}

void quantize_row_iq4_xs(const float* in, int64_t n, uint8_t* out) {
  CHECK(n % 256 == 0) << "iq4_xs: n " << n;
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* x = in + b * 256;
    uint8_t* blk = out + b * 136;
    std::memset(blk, 0, 136);
    float s[8], smax = 0.0f;
    for (int j = 0; j < 8; ++j) {
      s[j] = signed_scale(x + 32 * j);
      smax = std::max(smax, std::fabs(s[j]));
    }
    // Codes ls - 32 in [-32, 31]; |s| / d <= 31, so rounding away from zero stays in range.
    uint16_t dh = f32_to_f16(smax / 31.0f * (1.0f + 0x1p-20f));
    if (f16_to_f32(dh) < smax / 31.0f) ++dh;
    const float d = f16_to_f32(dh);
    std::memcpy(blk, &dh, 2);
    uint16_t scales_h = 0;
    for (int j = 0; j < 8; ++j) {
      int code = 0;
      if (d > 0.0f && s[j] != 0.0f) {
        const float r = s[j] / d;
        code = static_cast<int>(r > 0 ? std::ceil(r) : std::floor(r));
        code = std::clamp(code, -32, 31);
      }
      const int ls = code + 32;
      blk[4 + j / 2] |= static_cast<uint8_t>((ls & 0x0f) << (4 * (j % 2)));
      scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * j));
      quantize_nibbles(x + 32 * j, d * static_cast<float>(code), blk + 8 + 16 * j);
    }
    std::memcpy(blk + 2, &scales_h, 2);
  }
}

}  // namespace densa
