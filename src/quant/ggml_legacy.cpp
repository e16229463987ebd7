#include "quant/ggml_legacy.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"
#include "quant/block_bytes.h"

namespace densa {
namespace {

using block_bytes::load_f16;
using block_bytes::load_u32;
using block_bytes::store_f16;

// Q4_1 / Q5_1 share everything but the fifth bit: `bytes` per block, qh at byte 4 when `five`.
void dequantize_offset(const uint8_t* blocks, int64_t n, float* out, bool five) {
  const int64_t bytes = five ? 24 : 20;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = blocks + b * bytes;
    const float d = load_f16(blk), m = load_f16(blk + 2);
    const uint32_t qh = five ? load_u32(blk + 4) : 0;
    const uint8_t* qs = blk + (five ? 8 : 4);
    float* y = out + b * 32;
    for (int j = 0; j < 16; ++j) {
      const int q0 = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int q1 = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      const float p0 = static_cast<float>(q0) * d, p1 = static_cast<float>(q1) * d;
      y[j] = p0 + m;
      y[j + 16] = p1 + m;
    }
  }
}

void quantize_offset(const float* in, int64_t n, uint8_t* out, bool five) {
  CHECK(n % 32 == 0) << (five ? "q5_1" : "q4_1") << ": n " << n;
  const int64_t bytes = five ? 24 : 20;
  const int qmax = five ? 31 : 15;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* x = in + b * 32;
    uint8_t* blk = out + b * bytes;
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    const float d = (hi - lo) / static_cast<float>(qmax);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(blk, d);
    store_f16(blk + 2, lo);
    uint32_t qh = 0;
    uint8_t* qs = blk + (five ? 8 : 4);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(qmax, static_cast<int>(static_cast<uint8_t>((x[j] - lo) * id + 0.5f)));
      const int q1 = std::min(qmax, static_cast<int>(static_cast<uint8_t>((x[j + 16] - lo) * id + 0.5f)));
      qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    if (five) std::memcpy(blk + 4, &qh, 4);
  }
}

}  // namespace

void dequantize_q4_1(const uint8_t* blocks, int64_t n, float* out) { dequantize_offset(blocks, n, out, false); }
void dequantize_q5_1(const uint8_t* blocks, int64_t n, float* out) { dequantize_offset(blocks, n, out, true); }

void dequantize_q5_0(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = blocks + b * 22;
    const float d = load_f16(blk);
    const uint32_t qh = load_u32(blk + 2);
    const uint8_t* qs = blk + 6;
    float* y = out + b * 32;
    for (int j = 0; j < 16; ++j) {
      const int q0 = ((qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4)) - 16;
      const int q1 = ((qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - 16;
      y[j] = static_cast<float>(q0) * d;
      y[j + 16] = static_cast<float>(q1) * d;
    }
  }
}

void quantize_row_q4_1(const float* in, int64_t n, uint8_t* out) { quantize_offset(in, n, out, false); }
void quantize_row_q5_1(const float* in, int64_t n, uint8_t* out) { quantize_offset(in, n, out, true); }

void quantize_row_q5_0(const float* in, int64_t n, uint8_t* out) {
  CHECK(n % 32 == 0) << "q5_0: n " << n;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* x = in + b * 32;
    uint8_t* blk = out + b * 22;
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        m = x[j];
      }
    }
    const float d = m / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(blk, d);
    uint32_t qh = 0;
    uint8_t* qs = blk + 6;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    std::memcpy(blk + 2, &qh, 4);
  }
}

}  // namespace densa
