// FP8 e4m3fn codec: exhaustive over the 256 codes, and random floats against an independent
// brute-force reference (nearest representable value by scanning every code).
#include "quant/fp8.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace densa {
namespace {

// Independent formula: sign * 2^(e-7) * (1 + m/8), subnormal sign * m/8 * 2^-6.
double formula_value(int code) {
  const int sign = (code & 0x80) ? -1 : 1;
  const int e = (code >> 3) & 0xf;
  const int m = code & 7;
  if (e == 0) return sign * (m / 8.0) * std::ldexp(1.0, -6);
  return sign * std::ldexp(1.0, e - 7) * (1.0 + m / 8.0);
}

bool is_nan_code(int code) { return (code & 0x7f) == 0x7f; }

const std::vector<double>& formula_table() {
  static const std::vector<double> table = [] {
    std::vector<double> t(256);
    for (int c = 0; c < 256; ++c) t[c] = formula_value(c);
    return t;
  }();
  return table;
}

// Nearest representable code with the sign of x, ties to the even mantissa; |x| beyond the
// largest finite value lands on +-448 because that is the nearest code (saturation).
uint8_t reference_encode(float x) {
  if (std::isnan(x)) return 0x7f;
  const int sign_bit = std::signbit(x) ? 0x80 : 0;
  const double target = static_cast<double>(x);
  const std::vector<double>& values = formula_table();
  int best = -1;
  double best_dist = std::numeric_limits<double>::infinity();
  for (int mag = 0; mag < 0x7f; ++mag) {
    const int code = sign_bit | mag;
    const double dist = std::fabs(values[code] - target);
    if (dist < best_dist || (dist == best_dist && (code & 1) == 0)) {
      best = code;
      best_dist = dist;
    }
  }
  return static_cast<uint8_t>(best);
}

TEST(Fp8Test, DecodesAllCodesByFormula) {
  int num_nan = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    if (is_nan_code(c)) {
      EXPECT_TRUE(std::isnan(v)) << c;
      ++num_nan;
      continue;
    }
    EXPECT_EQ(static_cast<double>(v), formula_value(c)) << "code " << c;
    EXPECT_EQ(fp8_e4m3_decode_table()[c], v);
  }
  EXPECT_EQ(num_nan, 2);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
}

TEST(Fp8Test, RoundTripsEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if (is_nan_code(c)) continue;
    EXPECT_EQ(fp8_e4m3_from_f32(fp8_e4m3_to_f32(static_cast<uint8_t>(c))), c) << "code " << c;
  }
}

TEST(Fp8Test, SignedZeroNaNAndSaturation) {
  EXPECT_EQ(fp8_e4m3_from_f32(0.0f), 0x00);
  EXPECT_EQ(fp8_e4m3_from_f32(-0.0f), 0x80);
  EXPECT_EQ(fp8_e4m3_from_f32(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(fp8_e4m3_from_f32(-std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(fp8_e4m3_from_f32(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(fp8_e4m3_from_f32(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(fp8_e4m3_from_f32(449.0f), 0x7e);
  EXPECT_EQ(fp8_e4m3_from_f32(464.0f), 0x7e);  // would round to 480 without saturation
  EXPECT_EQ(fp8_e4m3_from_f32(1e30f), 0x7e);
  EXPECT_EQ(fp8_e4m3_from_f32(-1e30f), 0xfe);
  EXPECT_EQ(fp8_e4m3_from_f32(std::numeric_limits<float>::max()), 0x7e);
  // Tiny values round to a signed zero.
  EXPECT_EQ(fp8_e4m3_from_f32(1e-30f), 0x00);
  EXPECT_EQ(fp8_e4m3_from_f32(-1e-30f), 0x80);
  EXPECT_EQ(fp8_e4m3_from_f32(std::numeric_limits<float>::denorm_min()), 0x00);
}

TEST(Fp8Test, MidpointsRoundToEven) {
  // Between every pair of adjacent finite codes of one sign, the exact midpoint goes to the
  // even code, and a nudge either way goes to the nearer one.
  for (int sign : {0, 0x80}) {
    for (int mag = 0; mag < 0x7e; ++mag) {
      const int lo = sign | mag;
      const int hi = sign | (mag + 1);
      const double a = formula_value(lo);
      const double b = formula_value(hi);
      const float mid = static_cast<float>((a + b) / 2);  // exact in f32
      ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
      const int even = (lo & 1) == 0 ? lo : hi;
      EXPECT_EQ(fp8_e4m3_from_f32(mid), even) << "midpoint of " << lo << " and " << hi;
      const float toward_lo = std::nextafter(mid, static_cast<float>(a));
      const float toward_hi = std::nextafter(mid, static_cast<float>(b));
      EXPECT_EQ(fp8_e4m3_from_f32(toward_lo), lo);
      EXPECT_EQ(fp8_e4m3_from_f32(toward_hi), hi);
    }
  }
  // Smallest subnormal: 2^-10 is the midpoint between 0 and 2^-9 -> 0 (even).
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(1.5f, -10)), 0x01);
  // Midpoint between 1 + 7/8 at exponent 8 (480 would be next, so saturation wins).
  EXPECT_EQ(fp8_e4m3_from_f32(456.0f), 0x7e);
}

TEST(Fp8Test, RandomFloatsMatchBruteForceReference) {
  std::mt19937 rng(20240517);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_real_distribution<float> log2_mag(-14.0f, 10.0f);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  constexpr int kCount = 1 << 21;  // per distribution; three distributions
  int64_t mismatches = 0;
  for (int i = 0; i < kCount; ++i) {
    // 1) every f32 bit pattern (NaNs, infinities, f32 subnormals, huge and tiny values)
    // 2) log-uniform magnitudes over the e4m3 range and a little beyond, random sign
    // 3) uniform in [-1, 1] (typical normalized activations)
    const float x1 = std::bit_cast<float>(any_bits(rng));
    const float x2 = std::copysign(std::exp2(log2_mag(rng)), unit(rng));
    const float x3 = unit(rng);
    for (float x : {x1, x2, x3}) {
      const uint8_t got = fp8_e4m3_from_f32(x);
      const uint8_t want = reference_encode(x);
      if (got != want && ++mismatches <= 10) {
        ADD_FAILURE() << "x=" << x << " (bits " << std::bit_cast<uint32_t>(x) << ") got "
                      << int{got} << " want " << int{want};
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Fp8Test, BulkEncodeDecodeWithScale) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(1000);
  for (float& v : x) v = normal(rng);
  const float scale = 0.03125f;
  std::vector<uint8_t> q(x.size());
  fp8_e4m3_encode(x, scale, q);
  std::vector<float> y(x.size());
  fp8_e4m3_decode(q, scale, y);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(q[i], fp8_e4m3_from_f32(x[i] / scale)) << i;
    EXPECT_EQ(y[i], fp8_e4m3_to_f32(q[i]) * scale) << i;
    // Relative error of a 3-bit mantissa is at most 2^-4 for normals.
    EXPECT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i]) / 16 + scale * std::ldexp(1.0f, -10)) << i;
  }
  // An odd length exercises any tail handling in the vector loop.
  std::vector<float> tail = {1.0f, -2.0f, 1e6f};
  std::vector<uint8_t> tq(3);
  fp8_e4m3_encode(tail, 0.5f, tq);
  EXPECT_EQ(tq[0], fp8_e4m3_from_f32(2.0f));
  EXPECT_EQ(tq[1], fp8_e4m3_from_f32(-4.0f));
  EXPECT_EQ(tq[2], 0x7e);
}

}  // namespace
}  // namespace densa
