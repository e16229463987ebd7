// GGUF block formats beyond Q8_0 / Q4_0 (quant/ggml_blocks.h), three independent checks each:
//  - hand-built blocks: the test packs chosen codes and scales by the format's definition and
//    computes every value from that definition (scales chosen so every product is exact);
//  - a round trip through densa's reference quantizer within its stated error bound;
//  - equality, bit for bit, with llama.cpp's own ggml dequantizer on blocks ggml quantized
//    (tests/data/ggml_quants/ggml_reference.gguf, written by make_reference.py there).
#include "quant/ggml_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/gguf_file.h"
#include "quant/ggml_iq4.h"
#include "quant/mxfp4.h"

namespace densa {
namespace {

const GgmlBlockFormat& fmt(uint32_t type) {
  const GgmlBlockFormat* f = ggml_block_format(type);
  EXPECT_NE(f, nullptr) << type;
  return *f;
}

std::vector<float> dequant(uint32_t type, const std::vector<uint8_t>& blocks) {
  const GgmlBlockFormat& f = fmt(type);
  const int64_t n = static_cast<int64_t>(blocks.size()) / f.block_bytes * f.block_elems;
  std::vector<float> out(static_cast<size_t>(n));
  f.dequantize(blocks.data(), n, out.data());
  return out;
}

void put_f16(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = f32_to_f16(v);
  ASSERT_EQ(f16_to_f32(h), v) << "test scale must be exact in f16";
  std::memcpy(b.data() + at, &h, 2);
}

void set_bits(std::vector<uint8_t>& b, size_t byte, int shift, int value) {
  b[byte] = static_cast<uint8_t>(b[byte] | (value << shift));
}

std::vector<int> random_codes(int n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  std::vector<int> q(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) q[i] = i < hi - lo + 1 ? lo + i : u(rng);  // every code at least once
  return q;
}

// ---- hand-built blocks ----

TEST(GgmlBlocksHandBuilt, Q4_1AndQ5_1AreCodeTimesDPlusM) {
  for (const bool five : {false, true}) {
    const std::vector<int> q = random_codes(32, 0, five ? 31 : 15, 1);
    std::vector<uint8_t> b(five ? 24 : 20, 0);
    put_f16(b, 0, 0.25f);
    put_f16(b, 2, -1.5f);
    const size_t qs = five ? 8 : 4;
    for (int e = 0; e < 32; ++e) {
      set_bits(b, qs + e % 16, e < 16 ? 0 : 4, q[e] & 15);
      if (q[e] & 16) set_bits(b, 4 + e / 8, e % 8, 1);  // bit e of the little-endian u32 qh
    }
    const auto y = dequant(five ? ggml_type::kQ5_1 : ggml_type::kQ4_1, b);
    for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], q[e] * 0.25f - 1.5f) << five << " " << e;
  }
}

TEST(GgmlBlocksHandBuilt, Q5_0IsCodeMinus16TimesD) {
  const std::vector<int> q = random_codes(32, 0, 31, 2);
  std::vector<uint8_t> b(22, 0);
  put_f16(b, 0, -0.125f);
  for (int e = 0; e < 32; ++e) {
    set_bits(b, 6 + e % 16, e < 16 ? 0 : 4, q[e] & 15);
    if (q[e] & 16) set_bits(b, 2 + e / 8, e % 8, 1);
  }
  const auto y = dequant(ggml_type::kQ5_0, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], (q[e] - 16) * -0.125f) << e;
}

// Q2_K: 16 sub-blocks of 16; scales[s] = scale | min << 4; qs: element e's 2 bits at byte
// 32*(e/128) + e%32, bit 2*((e%128)/32); d, dmin at bytes 80, 82.
TEST(GgmlBlocksHandBuilt, Q2_KIsScaledCodeMinusScaledMin) {
  const std::vector<int> q = random_codes(256, 0, 3, 3);
  const std::vector<int> sc = random_codes(16, 0, 15, 4), mn = random_codes(16, 0, 15, 5);
  std::vector<uint8_t> b(84, 0);
  for (int s = 0; s < 16; ++s) b[s] = static_cast<uint8_t>(sc[s] | mn[s] << 4);
  for (int e = 0; e < 256; ++e) set_bits(b, 16 + 32 * (e / 128) + e % 32, 2 * ((e % 128) / 32), q[e]);
  put_f16(b, 80, 0.5f);
  put_f16(b, 82, 0.0625f);
  const auto y = dequant(ggml_type::kQ2_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * sc[e / 16] * q[e] - 0.0625f * mn[e / 16]) << e;
}

// Q3_K: hmask[32] (element e's bit 2 at hmask[e%32], bit 4*(e/128) + (e%128)/32; a set bit
// means code - 0, clear means code - 4), qs[64] low 2 bits as Q2_K, 12 scale bytes (low 4 bits
// of scale j: byte j (j < 8) or the high nibble of byte j-8; top 2 bits: byte 8 + j%4, bits
// 2*(j/4)), stored +32; d at byte 108.
TEST(GgmlBlocksHandBuilt, Q3_KIsSignedScaleTimesSignedCode) {
  const std::vector<int> q = random_codes(256, -4, 3, 6), sc = random_codes(16, -32, 31, 7);
  std::vector<uint8_t> b(110, 0);
  for (int e = 0; e < 256; ++e) {
    const int u = q[e] + 4, shift = (e % 128) / 32;
    set_bits(b, 32 + 32 * (e / 128) + e % 32, 2 * shift, u & 3);
    if (u & 4) set_bits(b, e % 32, 4 * (e / 128) + shift, 1);
  }
  for (int j = 0; j < 16; ++j) {
    const int v = sc[j] + 32;
    set_bits(b, 96 + (j < 8 ? j : j - 8), j < 8 ? 0 : 4, v & 15);
    set_bits(b, 96 + 8 + j % 4, 2 * (j / 4), v >> 4);
  }
  put_f16(b, 108, 0.03125f);
  const auto y = dequant(ggml_type::kQ3_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.03125f * sc[e / 16] * q[e]) << e;
}

// Q4_K / Q5_K: d, dmin, 12 bytes of 6-bit scales and mins (j < 4: scale in byte j, min in
// byte j+4, low 6 bits; j >= 4: low 4 bits in byte j+4 (scale low nibble, min high nibble),
// top 2 bits in the top bits of byte j-4 (scale) and byte j (min)); Q5_K: qh[32] (element
// e's bit 4 at qh[e%32] bit e/32); qs: element e at byte 32*(e/64) + e%32, high nibble when
// (e%64) >= 32.
TEST(GgmlBlocksHandBuilt, Q4_KAndQ5_KAreScaledCodeMinusScaledMin) {
  for (const bool five : {false, true}) {
    const std::vector<int> q = random_codes(256, 0, five ? 31 : 15, 8);
    const std::vector<int> sc = random_codes(8, 0, 63, 9), mn = random_codes(8, 0, 63, 10);
    std::vector<uint8_t> b(five ? 176 : 144, 0);
    put_f16(b, 0, 0.125f);
    put_f16(b, 2, 0.015625f);
    for (int j = 0; j < 8; ++j) {
      if (j < 4) {
        set_bits(b, 4 + j, 0, sc[j]);
        set_bits(b, 4 + j + 4, 0, mn[j]);
      } else {
        set_bits(b, 4 + j + 4, 0, (sc[j] & 15) | (mn[j] & 15) << 4);
        set_bits(b, 4 + j - 4, 6, sc[j] >> 4);
        set_bits(b, 4 + j, 6, mn[j] >> 4);
      }
    }
    const size_t qs = five ? 48 : 16;
    for (int e = 0; e < 256; ++e) {
      set_bits(b, qs + 32 * (e / 64) + e % 32, (e % 64) >= 32 ? 4 : 0, q[e] & 15);
      if (q[e] & 16) set_bits(b, 16 + e % 32, e / 32, 1);
    }
    const auto y = dequant(five ? ggml_type::kQ5_K : ggml_type::kQ4_K, b);
    for (int e = 0; e < 256; ++e) {
      EXPECT_EQ(y[e], 0.125f * sc[e / 32] * q[e] - 0.015625f * mn[e / 32]) << five << " " << e;
    }
  }
}

// Q6_K: ql[128], qh[64], int8 scales[16], d at 208. Element e: h = e/128, k = (e%128)/32:
// low 4 bits in ql[64h + 32*(k%2) + e%32] (high nibble when k >= 2), top 2 bits in
// qh[32h + e%32] bits 2k; code - 32.
TEST(GgmlBlocksHandBuilt, Q6_KIsScaleTimesCodeMinus32) {
  const std::vector<int> q = random_codes(256, -32, 31, 11), sc = random_codes(16, -128, 127, 12);
  std::vector<uint8_t> b(210, 0);
  for (int e = 0; e < 256; ++e) {
    const int u = q[e] + 32, h = e / 128, k = (e % 128) / 32;
    set_bits(b, 64 * h + 32 * (k % 2) + e % 32, k >= 2 ? 4 : 0, u & 15);
    set_bits(b, 128 + 32 * h + e % 32, 2 * k, u >> 4);
  }
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(sc[s]));
  put_f16(b, 208, 0.00390625f);
  const auto y = dequant(ggml_type::kQ6_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.00390625f * sc[e / 16] * q[e]) << e;
}

// The IQ4 grid as published with the format (ggml's kvalues_iq4nl), written out here.
constexpr int kGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(GgmlBlocksHandBuilt, Iq4NlIsDTimesGridLevel) {
  const std::vector<int> q = random_codes(32, 0, 15, 13);
  std::vector<uint8_t> b(18, 0);
  put_f16(b, 0, 0.5f);
  for (int e = 0; e < 32; ++e) set_bits(b, 2 + e % 16, e < 16 ? 0 : 4, q[e]);
  const auto y = dequant(ggml_type::kIQ4_NL, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.5f * kGrid[q[e]]) << e;
}

// IQ4_XS: d, u16 scales_h (sub-block s's top 2 bits at bits 2s), scales_l[4] (s's low 4 bits
// in byte s/2, nibble s%2), qs[128] (16 bytes per sub-block in IQ4_NL's order); scale ls - 32.
TEST(GgmlBlocksHandBuilt, Iq4XsIsSubScaleTimesGridLevel) {
  const std::vector<int> q = random_codes(256, 0, 15, 14), ls = random_codes(8, 0, 63, 15);
  std::vector<uint8_t> b(136, 0);
  put_f16(b, 0, 0.0625f);
  for (int s = 0; s < 8; ++s) {
    set_bits(b, 4 + s / 2, 4 * (s % 2), ls[s] & 15);
    set_bits(b, 2 + (2 * s) / 8, (2 * s) % 8, ls[s] >> 4);
  }
  for (int e = 0; e < 256; ++e) set_bits(b, 8 + 16 * (e / 32) + e % 16, (e % 32) < 16 ? 0 : 4, q[e]);
  const auto y = dequant(ggml_type::kIQ4_XS, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.0625f * (ls[e / 32] - 32) * kGrid[q[e]]) << e;
}

// MXFP4: E2M1 code c (sign bit 3; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6) times 2^(e - 127).
TEST(GgmlBlocksHandBuilt, Mxfp4IsE2M1TimesPowerOfTwo) {
  const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (const int e8 : {0, 1, 2, 100, 127, 130, 254, 255}) {
    const std::vector<int> q = random_codes(32, 0, 15, static_cast<uint32_t>(16 + e8));
    std::vector<uint8_t> b(17, 0);
    b[0] = static_cast<uint8_t>(e8);
    for (int e = 0; e < 32; ++e) set_bits(b, 1 + e % 16, e < 16 ? 0 : 4, q[e]);
    const auto y = dequant(ggml_type::kMXFP4, b);
    for (int e = 0; e < 32; ++e) {
      const double want = (q[e] & 8 ? -1.0 : 1.0) * mag[q[e] & 7] * std::ldexp(1.0, e8 - 127);
      EXPECT_EQ(static_cast<double>(y[e]), static_cast<float>(want)) << e8 << " " << e;
    }
  }
}

// ---- round trips through densa's reference quantizers ----

// |error| bound per block of the quantizers' stated contracts, from the block's own values
// (times 1.002 for the f16 rounding of the stored factors).
double block_bound(uint32_t type, const float* x, int n);
double block_bound_exact(uint32_t type, const float* x, int n) {
  auto amax = [&](int from, int len) {
    double a = 0;
    for (int i = 0; i < len; ++i) a = std::max(a, std::fabs(static_cast<double>(x[from + i])));
    return a;
  };
  auto range = [&](int from, int len) {  // hi - lo with lo <= 0 <= hi (K-quant mins)
    double lo = 0, hi = 0;
    for (int i = 0; i < len; ++i) {
      lo = std::min(lo, static_cast<double>(x[from + i]));
      hi = std::max(hi, static_cast<double>(x[from + i]));
    }
    return hi - lo;
  };
  const double slack = 1e-6 * amax(0, n) + 1e-30;  // f16 rounding of the stored factors
  switch (type) {
    case ggml_type::kQ4_1:
    case ggml_type::kQ5_1: {
      double lo = x[0], hi = x[0];
      for (int i = 0; i < n; ++i) lo = std::min(lo, double(x[i])), hi = std::max(hi, double(x[i]));
      const double q = type == ggml_type::kQ4_1 ? 15 : 31;
      return 0.5 * (hi - lo) / q * (1 + 1e-2) + 2e-3 * std::max(std::fabs(lo), std::fabs(hi)) + slack;
    }
    case ggml_type::kQ5_0: return amax(0, n) / 16 * (1 + 1e-2) + slack;  // one step on the clamped side
    case ggml_type::kQ2_K:
    case ggml_type::kQ4_K:
    case ggml_type::kQ5_K: {
      const int len = type == ggml_type::kQ2_K ? 16 : 32;
      const double nmax = type == ggml_type::kQ2_K ? 3 : type == ggml_type::kQ4_K ? 15 : 31;
      const double codes = type == ggml_type::kQ2_K ? 15 : 63;
      double top = 0;
      for (int s = 0; s < n; s += len) top = std::max(top, range(s, len));
      // step <= (range + dmin) / nmax + d, dmin <= top / codes, d <= (top + dmin) / nmax / codes
      const double d = (top * (1 + 1 / codes)) / nmax / codes * (1 + 1e-3);
      return 0.5 * ((top + top / codes) / nmax + d) + slack;  // the loosest sub-block's half step
    }
    case ggml_type::kQ3_K:
    case ggml_type::kQ6_K: {
      const double qpos = type == ggml_type::kQ3_K ? 3 : 31, codes = type == ggml_type::kQ3_K ? 31 : 127;
      const double a = amax(0, n);
      return 0.5 * (a / qpos + a / qpos / codes * (1 + 1e-3)) + slack;
    }
    case ggml_type::kIQ4_NL: return 14 * amax(0, n) / 127 * (1 + 1e-3) + slack;
    case ggml_type::kIQ4_XS: {
      const double a = amax(0, n);
      return 14 * (a / 127 + a / 127 / 31 * (1 + 1e-3)) + slack;
    }
    case ggml_type::kMXFP4: return 2 * (amax(0, n) / 6) + slack;  // 2 * 2^(e-128) <= 2 * amax / 6
  }
  return 0;
}

double block_bound(uint32_t type, const float* x, int n) { return block_bound_exact(type, x, n) * 1.002; }

TEST(GgmlBlocksRoundTrip, EveryFormatWithinItsBound) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int n = 1024;
  for (const GgmlBlockFormat& f : ggml_block_formats()) {
    for (const float scale : {1e-3f, 1.0f, 300.0f}) {
      std::vector<float> x(n);
      for (int i = 0; i < n; ++i) x[i] = scale * normal(rng) * (i % 97 == 0 ? 6.0f : 1.0f);
      for (int i = 256; i < 288; ++i) x[i] = 0.0f;            // an all-zero 32-block
      for (int i = 512; i < 768; ++i) x[i] = std::fabs(x[i]);  // a positive super-block
      std::vector<uint8_t> q(static_cast<size_t>(n / f.block_elems * f.block_bytes));
      f.quantize(x.data(), n, q.data());
      std::vector<float> y(n);
      f.dequantize(q.data(), n, y.data());
      double worst_rel = 0;
      for (int b = 0; b < n; b += static_cast<int>(f.block_elems)) {
        const double bound = block_bound(f.type, x.data() + b, static_cast<int>(f.block_elems));
        for (int i = b; i < b + f.block_elems; ++i) {
          ASSERT_LE(std::fabs(double(y[i]) - x[i]), bound) << f.name << " scale " << scale << " i " << i;
        }
        if (b >= 256 && b < 288 && f.block_elems == 32) {
          for (int i = b; i < b + 32; ++i) EXPECT_EQ(y[i], 0.0f) << f.name << " zero block " << i;
        }
      }
      // And the error is not trivially satisfied: the values are not all zero.
      for (int i = 0; i < n; ++i) worst_rel = std::max(worst_rel, std::fabs(double(y[i])));
      EXPECT_GT(worst_rel, 0.0) << f.name;
    }
  }
}

// ---- llama.cpp's ggml as the oracle ----

TEST(GgmlBlocksLlamaCpp, DequantizedValuesEqualGgmlBitForBit) {
  const std::string path = std::string(DENSA_SOURCE_DIR) + "/tests/data/ggml_quants/ggml_reference.gguf";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  int checked = 0;
  for (const GgmlBlockFormat& fm : ggml_block_formats()) {
    for (const char* kind : {"quant", "quant.imat", "random"}) {
      const std::string name = std::string(fm.name) + "." + kind;
      auto q = f->tensor_bytes(name);
      auto want = f->tensor(name + ".ggml");
      ASSERT_TRUE(q.is_ok()) << q.status().to_string();
      ASSERT_TRUE(want.is_ok()) << want.status().to_string();
      ASSERT_EQ(q->ggml_type, fm.type) << name;
      const int64_t n = want->numel();
      std::vector<float> got(static_cast<size_t>(n));
      fm.dequantize(q->data, n, got.data());
      int mismatches = 0;
      for (int64_t i = 0; i < n; ++i) {
        uint32_t w;
        std::memcpy(&w, want->data + 4 * i, 4);
        if (bits_from_f32(got[i]) != w && mismatches++ < 5) {
          ADD_FAILURE() << name << " element " << i << ": densa " << got[i] << " ggml " << f32_from_bits(w);
        }
      }
      EXPECT_EQ(mismatches, 0) << name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 33);
}

// ggml's quantizer and densa's reference quantizer see the same source; both round trips land
// near it (a sanity check that the reference file's blocks hold the source, not noise).
TEST(GgmlBlocksLlamaCpp, GgmlBlocksHoldTheSource) {
  const std::string path = std::string(DENSA_SOURCE_DIR) + "/tests/data/ggml_quants/ggml_reference.gguf";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  auto src = f->tensor("source");
  ASSERT_TRUE(src.is_ok());
  const auto* x = reinterpret_cast<const float*>(src->data);
  for (const GgmlBlockFormat& fm : ggml_block_formats()) {
    auto q = f->tensor_bytes(std::string(fm.name) + ".quant");
    ASSERT_TRUE(q.is_ok());
    std::vector<float> y(static_cast<size_t>(src->numel()));
    fm.dequantize(q->data, src->numel(), y.data());
    double err = 0, norm = 0;
    for (int64_t i = 0; i < src->numel(); ++i) err += std::pow(y[i] - x[i], 2), norm += std::pow(x[i], 2);
    EXPECT_LT(std::sqrt(err / norm), 0.6) << fm.name;  // Q2_K is the coarsest
  }
}

}  // namespace
}  // namespace densa
