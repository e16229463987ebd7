#include "kernels/activation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/internal/activation_isa.h"
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

// Every ISA level this CPU has, against the double-precision reference, over the whole range
// exp sees: |gate| up to 120 (past overflow), subnormal results, zeros, infinities and NaN.
TEST(ActivationTest, SiluMulEveryIsaMatchesReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  constexpr int64_t kCount = 4096 + 13;
  std::vector<float> gate(kCount), up(kCount);
  for (int64_t k = 0; k < kCount; ++k) gate[k] = k % 2 == 0 ? wide(rng) : normal(rng);
  for (float& v : up) v = normal(rng);
  const float specials[] = {-200.0f, 200.0f, 0.0f, -0.0f, -87.0f, -89.0f, 88.0f, -103.0f, 1e-30f,
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity()};
  for (size_t k = 0; k < std::size(specials); ++k) gate[k] = specials[k];
  std::vector<float> want = gate;
  ref::silu_mul(want.data(), up.data(), kCount);
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Bf16}) {
    if (static_cast<int>(isa) > static_cast<int>(cpu_isa_hardware())) continue;
    SCOPED_TRACE(cpu_isa_name(isa));
    std::vector<float> got = gate;
    activation_internal::silu_mul_with_isa(isa, got.data(), up.data(), kCount);
    for (int64_t k = 0; k < kCount; ++k) {
      if (std::isnan(want[k])) {  // -inf gate: -inf / (1 + inf)
        ASSERT_TRUE(std::isnan(got[k])) << k;
        continue;
      }
      if (std::isinf(want[k])) {  // +inf gate
        ASSERT_EQ(got[k], want[k]) << k;
        continue;
      }
      // Below gate = -88.7, exp(-gate) overflows fp32 and the product flushes to -0 where the
      // double reference keeps a value under 1e-36 * |up|: allow that absolute error too.
      ASSERT_LE(std::fabs(got[k] - want[k]), 8 * std::ldexp(std::fabs(want[k]), -24) + 1e-35 * (1 + std::fabs(up[k])))
          << k << ": gate " << gate[k] << " up " << up[k];
    }
    std::vector<float> nan_gate = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
    const float nan_up[2] = {1.0f, 2.0f};
    activation_internal::silu_mul_with_isa(isa, nan_gate.data(), nan_up, 2);
    EXPECT_TRUE(std::isnan(nan_gate[0]));
    EXPECT_FLOAT_EQ(nan_gate[1], 2.0f / (1.0f + std::exp(-1.0f)));
  }
  if (cpu_isa_hardware() == CpuIsa::kAvx512Bf16) {  // the AVX2 kernel is the AVX-512 one's twin
    std::vector<float> a = gate, b = gate;
    activation_internal::silu_mul_with_isa(CpuIsa::kAvx2, a.data(), up.data(), kCount);
    activation_internal::silu_mul_with_isa(CpuIsa::kAvx512Bf16, b.data(), up.data(), kCount);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  }
}

// An element's result does not depend on where it sits in the call (vector body or masked
// tail) or on the call's length: a token's SwiGLU output is the same in any batch.
TEST(ActivationTest, SiluMulIsPositionInvariant) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 5.0f);
  std::vector<float> gate(37), up(37);
  for (float& v : gate) v = normal(rng);
  for (float& v : up) v = normal(rng);
  std::vector<float> whole = gate;
  silu_mul(whole.data(), up.data(), 37);
  for (int64_t begin : {0, 1, 5, 16, 21, 36}) {
    for (int64_t len : {int64_t{1}, int64_t{3}, int64_t{16}, 37 - begin}) {
      if (begin + len > 37) continue;
      std::vector<float> part(gate.begin() + begin, gate.begin() + begin + len);
      silu_mul(part.data(), up.data() + begin, len);
      for (int64_t k = 0; k < len; ++k) {
        ASSERT_EQ(part[k], whole[begin + k]) << "begin " << begin << " len " << len << " k " << k;
      }
    }
  }
}

// The residual add over a pool adds every element once, in place.
TEST(ActivationTest, AddIntoOverAPoolAddsEveryElementOnce) {
  for (int64_t count : {int64_t{1}, int64_t{63}, int64_t{200000}}) {
    std::vector<float> x(count), y(count);
    for (int64_t i = 0; i < count; ++i) {
      x[i] = static_cast<float>(i % 1000) * 0.5f;
      y[i] = 1.0f + static_cast<float>(i % 7);
    }
    ThreadPool pool(3);
    add_into(x.data(), y.data(), count, &pool);
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(x[i], static_cast<float>(i % 1000) * 0.5f + (1.0f + static_cast<float>(i % 7))) << "count " << count << " i " << i;
    }
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
