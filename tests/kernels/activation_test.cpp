#include "kernels/activation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/reference/activation_ref.h"

namespace densa {
namespace {

// Tolerance: fp32 exp (a few ulp) plus three fp32 roundings: |got - ref| <= 8 * 2^-24 * |ref|.
TEST(ActivationTest, SiluMulMatchesReference) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  constexpr int64_t kCount = 14336 + 3;
  std::vector<float> gate(kCount), up(kCount);
  for (float& v : gate) v = normal(rng);
  for (float& v : up) v = normal(rng);
  gate[0] = -200.0f;  // exp overflows: silu -> -0
  gate[1] = 200.0f;
  gate[2] = 0.0f;
  std::vector<float> got = gate, want = gate;
  silu_mul(got.data(), up.data(), kCount);
  ref::silu_mul(want.data(), up.data(), kCount);
  for (int64_t k = 0; k < kCount; ++k) {
    ASSERT_LE(std::fabs(got[k] - want[k]), 8 * std::ldexp(std::fabs(want[k]), -24) + 1e-38) << k;
  }
}

TEST(SoftmaxTest, MatchesReference) {
  std::mt19937 rng(10);
  for (int64_t count : {1, 2, 8, 128, 32000}) {
    for (float stddev : {0.1f, 10.0f, 1000.0f}) {
      std::normal_distribution<float> normal(0.0f, stddev);
      std::vector<float> x(count);
      for (float& v : x) v = normal(rng);
      std::vector<float> got = x, want = x;
      softmax(got.data(), count);
      ref::softmax(want.data(), count);
      // fp32 x - max rounds by up to 2^-24 * |x - max|, which exp turns into a relative error.
      float m = x[0];
      for (float v : x) m = std::max(m, v);
      double sum = 0.0;
      for (int64_t k = 0; k < count; ++k) {
        const double tol = std::ldexp(std::fabs(want[k]), -24) * (8 + std::fabs(x[k] - m));
        ASSERT_LE(std::fabs(got[k] - want[k]), tol + 1e-38)
            << "count=" << count << " k=" << k;
        sum += got[k];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST(SoftmaxTest, LargeLogitsDoNotOverflow) {
  std::vector<float> x = {1e30f, 1e30f, -1e30f};
  softmax(x.data(), 3);
  EXPECT_FLOAT_EQ(x[0], 0.5f);
  EXPECT_FLOAT_EQ(x[1], 0.5f);
  EXPECT_EQ(x[2], 0.0f);
}

}  // namespace
}  // namespace densa
