#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/reference/rope_ref.h"

namespace densa {
namespace {

// Angles are formed in double in both, so the kernel differs from the reference only by fp32
// rounding of cos/sin and of the two products and the sum:
// |out - ref| <= 4 * 2^-24 * (|a| + |b|) for the pair (a, b).
TEST(RopeTest, MatchesReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int head_dim : {2, 64, 128}) {
    for (float theta : {10000.0f, 1000000.0f}) {
      constexpr int kHeads = 3;
      const std::vector<int32_t> positions = {0, 1, 7, 4095, 131071, 1000000};
      const int64_t n = static_cast<int64_t>(positions.size());
      std::vector<float> x(n * kHeads * head_dim);
      for (float& v : x) v = normal(rng);
      std::vector<float> got = x, want = x;
      rope_neox(got.data(), positions.data(), n, kHeads, head_dim, theta);
      ref::rope_neox(want.data(), positions.data(), n, kHeads, head_dim, theta);
      const int half = head_dim / 2;
      for (int64_t v = 0; v < n * kHeads; ++v) {
        for (int k = 0; k < head_dim; ++k) {
          const int64_t idx = v * head_dim + k;
          const int64_t pair = v * head_dim + (k < half ? k + half : k - half);
          const double tol = 4 * std::ldexp(std::fabs(x[idx]) + std::fabs(x[pair]), -24);
          ASSERT_LE(std::fabs(got[idx] - want[idx]), tol) << "head_dim=" << head_dim << " idx=" << idx;
        }
      }
    }
  }
}

// One table serves tensors of different head counts (q and k of every layer in forward):
// each result is bit-identical to rope_neox on the same positions, including partial rotary.
TEST(RopeTest, TableAppliedToManyTensorsEqualsRopeNeox) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<int32_t> positions = {3, 0, 17, 4096, 99};
  const int64_t n = static_cast<int64_t>(positions.size());
  for (int rotary_dim : {0, 32}) {
    constexpr int kHeadDim = 64;
    RopeTable table;
    rope_table_build(table, positions.data(), n, kHeadDim, 500000.0f, rotary_dim);
    for (int heads : {16, 4, 1}) {
      std::vector<float> x(n * heads * kHeadDim);
      for (float& v : x) v = normal(rng);
      std::vector<float> got = x, want = x;
      rope_neox_apply(got.data(), table, heads);
      rope_neox(want.data(), positions.data(), n, heads, kHeadDim, 500000.0f, rotary_dim);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << "rotary_dim " << rotary_dim << " heads " << heads << " i " << i;
      }
      // And it did rotate: position 3's first pair moved.
      ASSERT_NE(got[0], x[0]);
    }
  }
}

// Split over a pool (a prefill's token count), the rotation gives the bits of one thread.
TEST(RopeTest, ApplyOverAPoolEqualsOneThread) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int64_t kTokens = 300;
  constexpr int kHeads = 4, kHeadDim = 64;
  std::vector<int32_t> positions(kTokens);
  for (int64_t i = 0; i < kTokens; ++i) positions[i] = static_cast<int32_t>(7 * i);
  RopeTable table;
  rope_table_build(table, positions.data(), kTokens, kHeadDim, 10000.0f);
  std::vector<float> x(kTokens * kHeads * kHeadDim);
  for (float& v : x) v = normal(rng);
  std::vector<float> one = x, pooled = x;
  rope_neox_apply(one.data(), table, kHeads);
  ThreadPool pool(3);
  rope_neox_apply(pooled.data(), table, kHeads, &pool);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(pooled[i]), std::bit_cast<uint32_t>(one[i])) << "i " << i;
  }
  ASSERT_NE(one.back(), x.back());  // the last token was rotated too
}

TEST(RopeTest, PositionZeroIsIdentity) {
  std::vector<float> x(2 * 64);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k) - 50.0f;
  std::vector<float> got = x;
  const int32_t pos = 0;
  rope_neox(got.data(), &pos, 1, 2, 64, 10000.0f);
  EXPECT_EQ(got, x);
}

// Rotate-half pairing: element i pairs with i + head_dim / 2, and pair 0 turns by pos radians.
TEST(RopeTest, RotateHalfPairing) {
  std::vector<float> x(8, 0.0f);
  x[0] = 1.0f;  // pair (0, 4), inv_freq = 1
  const int32_t pos = 1;
  rope_neox(x.data(), &pos, 1, 1, 8, 10000.0f);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-7);
  EXPECT_NEAR(x[4], std::sin(1.0), 1e-7);
  EXPECT_EQ(x[1], 0.0f);
}

}  // namespace
}  // namespace densa

namespace densa {
namespace {

// Partial rotary (GLM-4.5): the first rotary_dim elements of each head turn exactly like a
// rotary_dim-wide head (same kernel, bit-equal), the rest pass through; matches the reference.
TEST(RopeTest, PartialRotaryRotatesLeadingDimsOnly) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int kHeads = 3, kHeadDim = 16, kRot = 8;
  const std::vector<int32_t> positions = {0, 3, 250, 70000};
  const int64_t n = static_cast<int64_t>(positions.size());
  std::vector<float> x(n * kHeads * kHeadDim);
  for (float& v : x) v = normal(rng);
  std::vector<float> got = x, want = x;
  rope_neox(got.data(), positions.data(), n, kHeads, kHeadDim, 1e6f, kRot);
  ref::rope_neox(want.data(), positions.data(), n, kHeads, kHeadDim, 1e6f, kRot);
  std::vector<float> narrow;  // the leading kRot dims of every head, as heads of width kRot
  for (int64_t v = 0; v < n * kHeads; ++v) narrow.insert(narrow.end(), &x[v * kHeadDim], &x[v * kHeadDim + kRot]);
  rope_neox(narrow.data(), positions.data(), n, kHeads, kRot, 1e6f);
  for (int64_t v = 0; v < n * kHeads; ++v) {
    for (int k = 0; k < kHeadDim; ++k) {
      const int64_t idx = v * kHeadDim + k;
      if (k < kRot) {
        EXPECT_EQ(got[idx], narrow[v * kRot + k]) << idx;
        EXPECT_NEAR(got[idx], want[idx], 1e-6) << idx;
      } else {
        EXPECT_EQ(got[idx], x[idx]) << idx;
        EXPECT_EQ(want[idx], x[idx]) << idx;
      }
    }
  }
  // The rotated part really moved at position > 0.
  EXPECT_NE(got[kHeads * kHeadDim], x[kHeads * kHeadDim]);
}

}  // namespace
}  // namespace densa
