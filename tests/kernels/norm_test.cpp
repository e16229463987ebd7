#include "kernels/norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/reference/norm_ref.h"

namespace densa {
namespace {

std::vector<float> random_vec(size_t count, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(count);
  for (float& f : v) f = normal(rng);
  return v;
}

// Tolerance: two fp32 roundings per element (x * inv, then * w) plus the rounding of inv:
// |out - ref| <= 4 * 2^-24 * |ref|.
TEST(RmsNormTest, MatchesReference) {
  for (int64_t dim : {1, 7, 64, 4096, 7168}) {
    for (int64_t n : {1, 3}) {
      for (float stddev : {1e-3f, 1.0f, 300.0f}) {
        const std::vector<float> x = random_vec(n * dim, stddev, 1);
        const std::vector<float> w = random_vec(dim, 1.0f, 2);
        std::vector<float> got(x.size()), want(x.size());
        rmsnorm(x.data(), w.data(), n, dim, 1e-6f, got.data());
        ref::rmsnorm(x.data(), w.data(), n, dim, 1e-6f, want.data());
        for (size_t k = 0; k < got.size(); ++k) {
          ASSERT_LE(std::fabs(got[k] - want[k]), 4 * std::ldexp(std::fabs(want[k]), -24) + 1e-38)
              << "dim=" << dim << " n=" << n << " k=" << k;
        }
      }
    }
  }
}

TEST(RmsNormTest, InPlace) {
  const std::vector<float> x = random_vec(3 * 128, 2.0f, 3);
  const std::vector<float> w = random_vec(128, 1.0f, 4);
  std::vector<float> out(x.size()), in_place = x;
  rmsnorm(x.data(), w.data(), 3, 128, 1e-5f, out.data());
  rmsnorm(in_place.data(), w.data(), 3, 128, 1e-5f, in_place.data());
  EXPECT_EQ(out, in_place);
}

TEST(RmsNormTest, EpsDominatesZeroInput) {
  const std::vector<float> x(16, 0.0f), w(16, 1.0f);
  std::vector<float> out(16, 1.0f);
  rmsnorm(x.data(), w.data(), 1, 16, 1e-6f, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace densa
