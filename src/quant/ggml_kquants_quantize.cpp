#include "quant/ggml_kquants_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace densa {
namespace {

// The smallest f16 >= v (v >= 0, finite, below the f16 maximum).
uint16_t f16_at_least(float v) {
  uint16_t h = f32_to_f16(v);
  if (f16_to_f32(h) < v) ++h;  // positive halves are ordered like their bits
  return h;
}

void store_u16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

int ceil_code(float v, float unit, int max_code) {
  if (unit <= 0.0f || v <= 0.0f) return 0;
  return std::min(max_code, static_cast<int>(std::ceil(v / unit)));
}

// Scales and mins of one super-block with mins: `subs` sub-blocks of `len`, levels 0..nmax,
// codes 0..code_max. Fills sc[], m[] and the f16 factors; returns the quantized levels in q.
struct MinScales {
  uint16_t d = 0, dmin = 0;
  int sc[16] = {}, m[16] = {};
};

MinScales choose_min_scales(const float* x, int subs, int len, int nmax, int code_max, int* q) {
  float lo[16], hi[16];
  float max_lo = 0.0f;
  for (int s = 0; s < subs; ++s) {
    lo[s] = 0.0f;
    hi[s] = 0.0f;
    for (int i = 0; i < len; ++i) {
      lo[s] = std::min(lo[s], x[s * len + i]);
      hi[s] = std::max(hi[s], x[s * len + i]);
    }
    max_lo = std::max(max_lo, -lo[s]);
  }
  MinScales r;
  // 1 + 2^-20 guards the division's rounding so the largest sub-block's code stays <= code_max.
  r.dmin = f16_at_least(max_lo / static_cast<float>(code_max) * (1.0f + 0x1p-20f));
  const float dmin = f16_to_f32(r.dmin);
  float need[16], max_need = 0.0f;
  for (int s = 0; s < subs; ++s) {
    r.m[s] = ceil_code(-lo[s], dmin, code_max);
    need[s] = (hi[s] + dmin * static_cast<float>(r.m[s])) / static_cast<float>(nmax);
    max_need = std::max(max_need, need[s]);
  }
  r.d = f16_at_least(max_need / static_cast<float>(code_max) * (1.0f + 0x1p-20f));
  const float d = f16_to_f32(r.d);
  for (int s = 0; s < subs; ++s) {
    r.sc[s] = ceil_code(need[s], d, code_max);
    const float step = d * static_cast<float>(r.sc[s]), off = dmin * static_cast<float>(r.m[s]);
    for (int i = 0; i < len; ++i) {
      const int l = step > 0.0f ? static_cast<int>(std::lround((x[s * len + i] + off) / step)) : 0;
      q[s * len + i] = std::clamp(l, 0, nmax);
    }
  }
  return r;
}

// Symmetric: levels -qneg..qpos around zero, sub-blocks of 16, non-negative scale codes.
struct SymScales {
  uint16_t d = 0;
  int sc[16] = {};
};

SymScales choose_sym_scales(const float* x, int qneg, int qpos, int code_max, int* q) {
  float amax[16], top = 0.0f;
  for (int s = 0; s < 16; ++s) {
    amax[s] = 0.0f;
    for (int i = 0; i < 16; ++i) amax[s] = std::max(amax[s], std::fabs(x[16 * s + i]));
    top = std::max(top, amax[s] / static_cast<float>(qpos));
  }
  SymScales r;
  r.d = f16_at_least(top / static_cast<float>(code_max) * (1.0f + 0x1p-20f));
  const float d = f16_to_f32(r.d);
  for (int s = 0; s < 16; ++s) {
    r.sc[s] = ceil_code(amax[s] / static_cast<float>(qpos), d, code_max);
    const float step = d * static_cast<float>(r.sc[s]);
    for (int i = 0; i < 16; ++i) {
      const int l = step > 0.0f ? static_cast<int>(std::lround(x[16 * s + i] / step)) : 0;
      q[16 * s + i] = std::clamp(l, -qneg, qpos);
    }
  }
  return r;
}

// Q4_K / Q5_K's 12 scale bytes from 8 six-bit scales and mins (the inverse of kquant_scale_min).
void pack_scale_min(const int* sc, const int* m, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out[j] = static_cast<uint8_t>(sc[j]);
      out[j + 4] = static_cast<uint8_t>(m[j]);
    } else {
      out[j + 4] = static_cast<uint8_t>((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
      out[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
}

void quantize_q45_k(const float* in, int64_t n, uint8_t* out, bool five) {
  CHECK(n % 256 == 0) << (five ? "q5_k" : "q4_k") << ": n " << n;
  const int64_t bytes = five ? 176 : 144;
  int q[256];
  for (int64_t b = 0; b < n / 256; ++b) {
    uint8_t* blk = out + b * bytes;
    std::memset(blk, 0, static_cast<size_t>(bytes));
    const MinScales r = choose_min_scales(in + b * 256, 8, 32, five ? 31 : 15, 63, q);
    store_u16(blk, r.d);
    store_u16(blk + 2, r.dmin);
    pack_scale_min(r.sc, r.m, blk + 4);
    uint8_t* qh = blk + 16;
    uint8_t* qs = blk + (five ? 48 : 16);
    for (int e = 0; e < 256; ++e) {
      const int s = e / 32, l = e % 32;
      qs[32 * (e / 64) + l] |= static_cast<uint8_t>((q[e] & 0x0f) << (s % 2 == 0 ? 0 : 4));
      if (five && q[e] >= 16) qh[l] |= static_cast<uint8_t>(1u << s);
    }
  }
}

}  // namespace

void quantize_row_q2_k(const float* in, int64_t n, uint8_t* out) {
  CHECK(n % 256 == 0) << "q2_k: n " << n;
  int q[256];
  for (int64_t b = 0; b < n / 256; ++b) {
    uint8_t* blk = out + b * 84;
    std::memset(blk, 0, 84);
    const MinScales r = choose_min_scales(in + b * 256, 16, 16, 3, 15, q);
    for (int s = 0; s < 16; ++s) blk[s] = static_cast<uint8_t>(r.sc[s] | (r.m[s] << 4));
    for (int e = 0; e < 256; ++e) blk[16 + 32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q[e] << (2 * ((e % 128) / 32)));
    store_u16(blk + 80, r.d);
    store_u16(blk + 82, r.dmin);
  }
}

void quantize_row_q3_k(const float* in, int64_t n, uint8_t* out) {
  CHECK(n % 256 == 0) << "q3_k: n " << n;
  int q[256];
  for (int64_t b = 0; b < n / 256; ++b) {
    uint8_t* blk = out + b * 110;
    std::memset(blk, 0, 110);
    const SymScales r = choose_sym_scales(in + b * 256, 4, 3, 31, q);
    for (int e = 0; e < 256; ++e) {
      const int u = q[e] + 4;  // 0..7: low 2 bits in qs, bit 2 in hmask
      const int shift = (e % 128) / 32;
      blk[32 + 32 * (e / 128) + e % 32] |= static_cast<uint8_t>((u & 3) << (2 * shift));
      if (u & 4) blk[e % 32] |= static_cast<uint8_t>(1u << (4 * (e / 128) + shift));
    }
    uint8_t* scales = blk + 96;
    for (int j = 0; j < 16; ++j) {
      const int v = r.sc[j] + 32;  // stored +32
      scales[j < 8 ? j : j - 8] |= static_cast<uint8_t>((v & 0x0f) << (j < 8 ? 0 : 4));
      scales[8 + j % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (j / 4)));
    }
    store_u16(blk + 108, r.d);
  }
}

void quantize_row_q4_k(const float* in, int64_t n, uint8_t* out) { quantize_q45_k(in, n, out, false); }
void quantize_row_q5_k(const float* in, int64_t n, uint8_t* out) { quantize_q45_k(in, n, out, true); }

void quantize_row_q6_k(const float* in, int64_t n, uint8_t* out) {
  CHECK(n % 256 == 0) << "q6_k: n " << n;
  int q[256];
  for (int64_t b = 0; b < n / 256; ++b) {
    uint8_t* blk = out + b * 210;
    std::memset(blk, 0, 210);
    const SymScales r = choose_sym_scales(in + b * 256, 32, 31, 127, q);
    for (int e = 0; e < 256; ++e) {
      const int u = q[e] + 32;  // 0..63
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      blk[64 * h + 32 * (k & 1) + l] |= static_cast<uint8_t>((u & 0x0f) << (k >= 2 ? 4 : 0));
      blk[128 + 32 * h + l] |= static_cast<uint8_t>((u >> 4) << (2 * k));
    }
    for (int s = 0; s < 16; ++s) blk[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(r.sc[s]));
    store_u16(blk + 208, r.d);
  }
}

}  // namespace densa
