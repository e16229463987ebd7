// MoE routing variants on hand-computed cases: softmax top-k (Mixtral / Qwen) and sigmoid
// grouped top-k with correction bias (GLM-4.5 / DeepSeek-V3 noaux_tc).
#include "model/moe_routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace densa {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(MoeRoutingTest, SoftmaxTopKRenormalisedOrNot) {
  const std::vector<float> logits = {0, 1, 2, 3};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  route_softmax_topk(logits.data(), 1, 4, 2, /*norm_topk_prob=*/true, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 2}));
  EXPECT_NEAR(w[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-6);
  route_softmax_topk(logits.data(), 1, 4, 2, /*norm_topk_prob=*/false, ids.data(), w.data());
  const double z = std::exp(0.0) + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(w[0], std::exp(3.0) / z, 1e-6);  // plain softmax probabilities (Qwen2-MoE)
  EXPECT_NEAR(w[1], std::exp(2.0) / z, 1e-6);
}

TEST(MoeRoutingTest, SoftmaxTiesGoToLowerExpert) {
  const std::vector<float> logits = {1, 1, 1, 1, /*token 2*/ 0, 5, 0, 5};
  std::vector<int32_t> ids(4);
  std::vector<float> w(4);
  route_softmax_topk(logits.data(), 2, 4, 2, true, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 1, 3}));
}

// 8 experts in 4 groups of 2; group sums (sigmoid): g0 ~1.0 (holds the single best expert),
// g1 1.46, g2 1.42, g3 0.54. topk_group 2 keeps g1 and g2, so expert 0 is never chosen.
TEST(MoeRoutingTest, SigmoidGroupedKeepsBestGroupsOnly) {
  const std::vector<float> logits = {5, -5, 1, 1, 0.9f, 0.9f, -1, -1};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  route_sigmoid_grouped(logits.data(), nullptr, 1, 8, 2, 4, 2, true, 2.5f, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 3}));
  EXPECT_NEAR(w[0], 1.25, 1e-6);  // equal scores renormalised to 0.5, times 2.5
  EXPECT_NEAR(w[1], 1.25, 1e-6);
  // All in one group: the single best expert wins.
  route_sigmoid_grouped(logits.data(), nullptr, 1, 8, 2, 1, 1, false, 1.0f, ids.data(), w.data());
  EXPECT_EQ(ids[0], 0);
  EXPECT_NEAR(w[0], sigmoid(5.0), 1e-6);  // not renormalised
}

// The correction bias moves the choice (expert 4 overtakes 2 and 3) but the weights are the
// unbiased sigmoid scores.
TEST(MoeRoutingTest, CorrectionBiasSelectsButDoesNotWeigh) {
  const std::vector<float> logits = {5, -5, 1, 1, 0.9f, 0.9f, -1, -1};
  const std::vector<float> bias = {0, 0, 0, 0, 0.5f, 0, 0, 0};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  route_sigmoid_grouped(logits.data(), bias.data(), 1, 8, 2, 4, 2, true, 1.0f, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 2}));
  const double s4 = sigmoid(0.9), s2 = sigmoid(1.0);
  EXPECT_NEAR(w[0], s4 / (s4 + s2), 1e-6);
  EXPECT_NEAR(w[1], s2 / (s4 + s2), 1e-6);
}

// As in the HF reference, experts outside the kept groups score 0.0 (not -inf): when the
// kept group's biased scores are all negative, masked experts win.
TEST(MoeRoutingTest, MaskedExpertsScoreZeroLikeReference) {
  const std::vector<float> logits = {0, 0, 0, 0};
  const std::vector<float> bias = {-2, -2, -3, -3};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  route_sigmoid_grouped(logits.data(), bias.data(), 1, 4, 2, 2, 1, true, 1.0f, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 3}));
}

}  // namespace
}  // namespace densa
