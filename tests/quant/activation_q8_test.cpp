// quant/activation_q8.h: the int8 activation blocks of the W4A8 INT4 matmul.
#include "quant/activation_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace densa {
namespace {

TEST(ActivationQ8, ErrorWithinHalfStepAndAmaxMapsTo127) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int64_t count = 100;  // three full blocks and a partial one of 4
  std::vector<float> x(count);
  for (auto& v : x) v = normal(rng);
  std::vector<int8_t> q(count);
  std::vector<float> s(activation_q8_num_blocks(count));
  ASSERT_EQ(s.size(), 4u);
  activation_q8_quantize(x.data(), count, q.data(), s.data());
  for (int64_t b = 0; b < 4; ++b) {
    float amax = 0;
    int64_t at = 0;
    for (int64_t j = b * 32; j < std::min<int64_t>(count, b * 32 + 32); ++j) {
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), at = j;
    }
    EXPECT_EQ(s[b], amax / 127.0f);
    EXPECT_EQ(std::abs(q[at]), 127);
    for (int64_t j = b * 32; j < std::min<int64_t>(count, b * 32 + 32); ++j) {
      EXPECT_LE(std::fabs(x[j] - q[j] * s[b]), s[b] * 0.5f * (1 + 1e-5f)) << j;
    }
  }
}

TEST(ActivationQ8, ZeroBlockAndNonFiniteBlock) {
  std::vector<float> x(64, 0.0f);
  x[40] = 1.0f;
  x[41] = INFINITY;
  std::vector<int8_t> q(64, 1);
  float s[2];
  activation_q8_quantize(x.data(), 64, q.data(), s);
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_TRUE(std::isnan(s[1]));
  for (int8_t v : q) EXPECT_EQ(v, 0);
}

TEST(ActivationQ8, RoundsHalfToEven) {
  // amax 127 gives scale 1 and inv 1: x is rounded to the nearest integer, ties to even.
  std::vector<float> x = {127.0f, 2.5f, -2.5f, 3.5f, 0.49f};
  std::vector<int8_t> q(x.size());
  float s;
  activation_q8_quantize(x.data(), static_cast<int64_t>(x.size()), q.data(), &s);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(q, (std::vector<int8_t>{127, 2, -2, 4, 0}));
}

}  // namespace
}  // namespace densa
