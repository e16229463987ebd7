// The vector exp of the AVX2 kernels (kernels/internal/exp_avx2.h) against std::exp (within the
// polynomial's error, subnormal results and the clamp's ends included) and, where the CPU has
// AVX-512, against exp_avx512.h's exp_ps bit for bit (the two are documented as twins).
// GCC 12 false positives on the intrinsics' placeholders (see src/kernels/matmul/matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/internal/exp_avx2.h"
#include "kernels/internal/exp_avx512.h"
#include "kernels/internal/target.h"

namespace densa {
namespace {

DENSA_TARGET_AVX2_F16C void exp_avx2_all(const float* x, float* y, size_t n) {
  for (size_t i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, kernels_internal::exp_ps_avx2(_mm256_loadu_ps(x + i)));
}

__attribute__((target("avx512f,fma"))) void exp_avx512_all(const float* x, float* y, size_t n) {
  for (size_t i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, kernels_internal::exp_ps(_mm512_loadu_ps(x + i)));
}

std::vector<float> inputs() {
  std::vector<float> x;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-110.0f, 95.0f);
  for (int i = 0; i < 4096; ++i) x.push_back(u(rng));
  for (float v : {0.0f, -0.0f, 1.0f, -1.0f, 88.7f, 89.0f, -87.3f, -100.0f, -103.0f, -103.3f, -103.9f, -104.0f, -150.0f,
                  104.0f, 200.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  0.34657359f, -0.34657359f, 1e-30f}) {
    x.push_back(v);
  }
  while (x.size() % 16 != 0) x.push_back(0.5f);
  return x;
}

TEST(ExpAvx2, MatchesStdExpAndTheAvx512Twin) {
  if (static_cast<int>(cpu_isa_hardware()) < static_cast<int>(CpuIsa::kAvx2)) GTEST_SKIP() << "no AVX2";
  const std::vector<float> x = inputs();
  std::vector<float> y(x.size());
  exp_avx2_all(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float c = std::clamp(x[i], -104.0f, 104.0f);
    const double want = std::exp(static_cast<double>(c));
    if (want > std::numeric_limits<float>::max()) {
      EXPECT_EQ(y[i], std::numeric_limits<float>::infinity()) << "x " << x[i];
    } else if (want < std::numeric_limits<float>::min()) {  // subnormal: one rounding of ~2^-149
      EXPECT_NEAR(y[i], want, 0x1p-149 + want * 1e-6) << "x " << x[i];
    } else {
      EXPECT_NEAR(y[i], want, want * 2e-7) << "x " << x[i];
    }
  }
  if (cpu_isa_hardware() == CpuIsa::kAvx512Bf16) {
    std::vector<float> z(x.size());
    exp_avx512_all(x.data(), z.data(), x.size());
    EXPECT_EQ(0, std::memcmp(y.data(), z.data(), y.size() * 4));
  }
}

}  // namespace
}  // namespace densa
