#include "quant/ggml_kquants.h"

#include <cstring>

#include "core/dtype.h"
#include "quant/block_bytes.h"

namespace densa {
namespace {

using block_bytes::load_f16;

}  // namespace

void kquant_scale_min(const uint8_t* q, int j, int& scale, int& min) {
  // Sub-blocks 0..3 keep their 6 bits in the low bits of bytes j (scale) and j + 4 (min);
  // 4..7 keep their low 4 bits in byte j + 4 and their top 2 bits in the top bits of bytes
  // j - 4 (scale) and j (min).
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

int q3_k_scale(const uint8_t* q, int j) {
  // Low 4 bits: the low nibbles of bytes 0..7 for j < 8, their high nibbles for j >= 8; top 2
  // bits: bits 2*(j/4) of byte 8 + j%4.
  const int low = j < 8 ? (q[j] & 0x0f) : (q[j - 8] >> 4);
  const int high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

void dequantize_q2_k(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = blocks + b * 84;
    const uint8_t* scales = blk;
    const uint8_t* qs = blk + 16;
    const float d = load_f16(blk + 80), dmin = load_f16(blk + 82);
    float* y = out + b * 256;
    for (int s = 0; s < 16; ++s) {  // 16 sub-blocks of 16 elements
      const float dl = d * static_cast<float>(scales[s] & 0x0f);
      const float ml = dmin * static_cast<float>(scales[s] >> 4);
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * s + i;
        const int q = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        const float p = dl * static_cast<float>(q);
        y[e] = p - ml;
      }
    }
  }
}

void dequantize_q3_k(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = blocks + b * 110;
    const uint8_t* hmask = blk;
    const uint8_t* qs = blk + 32;
    const uint8_t* scales = blk + 96;
    const float d = load_f16(blk + 108);
    float* y = out + b * 256;
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(q3_k_scale(scales, s) - 32);
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * s + i;
        const int shift = (e % 128) / 32;
        const int low = (qs[32 * (e / 128) + e % 32] >> (2 * shift)) & 3;
        const bool high = (hmask[e % 32] >> (4 * (e / 128) + shift)) & 1;
        y[e] = dl * static_cast<float>(low - (high ? 0 : 4));
      }
    }
  }
}

namespace {

// Q4_K and Q5_K: `five` adds qh[32] before qs.
void dequantize_q45_k(const uint8_t* blocks, int64_t n, float* out, bool five) {
  const int64_t bytes = five ? 176 : 144;
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = blocks + b * bytes;
    const float d = load_f16(blk), dmin = load_f16(blk + 2);
    const uint8_t* scales = blk + 4;
    const uint8_t* qh = blk + 16;
    const uint8_t* qs = blk + (five ? 48 : 16);
    float* y = out + b * 256;
    for (int s = 0; s < 8; ++s) {  // 8 sub-blocks of 32 elements
      int sc = 0, m = 0;
      kquant_scale_min(scales, s, sc, m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        const int e = 32 * s + l;
        const uint8_t byte = qs[32 * (e / 64) + l];
        int q = (s % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
        if (five && ((qh[l] >> s) & 1)) q += 16;
        const float p = dl * static_cast<float>(q);
        y[e] = p - ml;
      }
    }
  }
}

}  // namespace

void dequantize_q4_k(const uint8_t* blocks, int64_t n, float* out) { dequantize_q45_k(blocks, n, out, false); }
void dequantize_q5_k(const uint8_t* blocks, int64_t n, float* out) { dequantize_q45_k(blocks, n, out, true); }

void dequantize_q6_k(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = blocks + b * 210;
    const uint8_t* ql = blk;
    const uint8_t* qh = blk + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(blk + 192);
    const float d = load_f16(blk + 208);
    float* y = out + b * 256;
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t byte = ql[64 * h + 32 * (k & 1) + l];
      const int low = k >= 2 ? (byte >> 4) : (byte & 0x0f);
      const int high = (qh[32 * h + l] >> (2 * k)) & 3;
      const int q = (low | (high << 4)) - 32;
      const float dl = d * static_cast<float>(scales[e / 16]);
      y[e] = dl * static_cast<float>(q);
    }
  }
}

}  // namespace densa
