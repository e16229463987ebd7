#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace densa {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<double> softmax(std::span<const float> logits, double temperature) {
  double max = -kInf;
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<float> random_logits(std::mt19937& rng, int n, float scale = 3.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> l(n);
  for (float& x : l) x = dist(rng);
  return l;
}

// Logits whose softmax is exactly `probs`.
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::vector<int> histogram(Sampler& s, std::span<const float> logits, int draws) {
  std::vector<int> h(logits.size());
  for (int i = 0; i < draws; ++i) ++h[s.sample(logits)];
  return h;
}

TEST(SamplerTest, GreedyTakesLowestIdOnTies) {
  Sampler s(SamplingParams{.temperature = 0.0f});
  const std::vector<float> l = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(s.sample(l), 1);
  EXPECT_EQ(greedy_token(l), 1);
  const std::vector<float> with_nan = {std::nanf(""), -kInf, 0.5f, 0.5f};
  EXPECT_EQ(s.sample(with_nan), 2);
  const std::vector<float> all_neg_inf = {-kInf, -kInf};
  EXPECT_EQ(s.sample(all_neg_inf), 0);
}

TEST(SamplerTest, TopK1AndTinyTopPEqualGreedy) {
  std::mt19937 rng(1);
  Sampler top_k1(SamplingParams{.temperature = 1.3f, .top_k = 1, .seed = 5});
  Sampler tiny_p(SamplingParams{.temperature = 0.8f, .top_p = 1e-6f, .seed = 6});
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> l = random_logits(rng, 300);
    if (trial % 3 == 0) l[200] = l[100] = *std::max_element(l.begin(), l.end()) + 1.0f;  // an exact tie
    const TokenId want = greedy_token(l);
    if (trial % 3 == 0) {
      EXPECT_EQ(want, 100);
    }
    EXPECT_EQ(top_k1.sample(l), want);
    EXPECT_EQ(tiny_p.sample(l), want);
  }
}

TEST(SamplerTest, TopKKeepsOnlyTheKMostLikely) {
  const std::vector<float> l = logits_for({0.1, 0.4, 0.05, 0.3, 0.15});
  Sampler s(SamplingParams{.top_k = 2, .seed = 3});
  const auto h = histogram(s, l, 20000);
  EXPECT_EQ(h[0] + h[2] + h[4], 0);
  // Renormalised: 0.4 / 0.7 and 0.3 / 0.7.
  EXPECT_NEAR(h[1] / 20000.0, 4.0 / 7.0, 0.015);
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<float> l = logits_for({0.5, 0.3, 0.15, 0.05});
  Sampler s(SamplingParams{.top_p = 0.75f, .seed = 4});  // 0.5 < 0.75 <= 0.8
  const auto h = histogram(s, l, 20000);
  EXPECT_EQ(h[2] + h[3], 0);
  EXPECT_NEAR(h[0] / 20000.0, 0.625, 0.015);
  Sampler s2(SamplingParams{.top_p = 0.9f, .seed = 4});  // needs the third token too
  const auto h2 = histogram(s2, l, 20000);
  EXPECT_EQ(h2[3], 0);
  EXPECT_GT(h2[2], 0);
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfMax) {
  const std::vector<float> l = logits_for({0.5, 0.3, 0.15, 0.05});
  Sampler s(SamplingParams{.min_p = 0.35f, .seed = 9});  // cut-off 0.175: keeps 0.5 and 0.3
  const auto h = histogram(s, l, 20000);
  EXPECT_EQ(h[2] + h[3], 0);
  EXPECT_NEAR(h[0] / 20000.0, 0.625, 0.015);
  // min_p applies after temperature: at T = 2 the probabilities flatten and 0.15 survives.
  Sampler hot(SamplingParams{.temperature = 2.0f, .min_p = 0.35f, .seed = 9});
  const auto h2 = histogram(hot, l, 20000);
  EXPECT_GT(h2[2], 0);
  EXPECT_EQ(h2[3], 0);  // sqrt(0.05 / 0.5) = 0.316 < 0.35
}

TEST(SamplerTest, NeverDrawsMinusInfOrNan) {
  const std::vector<float> l = {-kInf, 1.0f, std::nanf(""), 1.0f, -kInf};
  Sampler s(SamplingParams{.seed = 2});
  const auto h = histogram(s, l, 5000);
  EXPECT_EQ(h[0] + h[2] + h[4], 0);
  EXPECT_GT(h[1], 2000);
  EXPECT_GT(h[3], 2000);
}

TEST(SamplerTest, SameSeedSameTokens) {
  const SamplingParams params{.temperature = 0.9f, .top_k = 50, .top_p = 0.95f, .min_p = 0.01f, .seed = 1234};
  Sampler a(params), b(params);
  SamplingParams other = params;
  other.seed = 1235;
  Sampler c(other);
  std::mt19937 rng(11);
  int num_diff = 0;
  for (int step = 0; step < 300; ++step) {
    const std::vector<float> l = random_logits(rng, 1024, 1.0f);
    const TokenId ta = a.sample(l);
    EXPECT_EQ(ta, b.sample(l));
    num_diff += ta != c.sample(l);
  }
  EXPECT_GT(num_diff, 100);
}

TEST(SamplerTest, DrawsFollowTheSoftmax) {
  std::mt19937 rng(21);
  const std::vector<float> l = random_logits(rng, 8, 1.0f);
  const float temperature = 0.7f;
  Sampler s(SamplingParams{.temperature = temperature, .seed = 77});
  constexpr int kDraws = 200000;
  const auto h = histogram(s, l, kDraws);
  const std::vector<double> p = softmax(l, temperature);
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double expected = p[i] * kDraws;
    chi2 += (h[i] - expected) * (h[i] - expected) / expected;
    EXPECT_NEAR(h[i] / static_cast<double>(kDraws), p[i], 0.005) << i;
  }
  EXPECT_LT(chi2, 24.32);  // chi-square, 7 degrees of freedom, p = 0.001
}

TEST(SamplerTest, LogprobsAreLogSoftmax) {
  std::mt19937 rng(5);
  std::vector<float> l = random_logits(rng, 100);
  l[40] = l[60] = 50.0f;  // a tie at the top
  const std::vector<double> p = softmax(l, 1.0);
  const auto top = top_logprobs(l, 5);
  ASSERT_EQ(top.size(), 5u);
  EXPECT_EQ(top[0].first, 40);
  EXPECT_EQ(top[1].first, 60);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_NEAR(top[i].second, std::log(p[top[i].first]), 1e-5);
    if (i > 0) {
      EXPECT_LE(top[i].second, top[i - 1].second);
    }
  }
  double total = 0;
  for (const auto& [id, lp] : top_logprobs(l, 1000)) total += std::exp(lp);
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_EQ(top_logprobs(l, 1000).size(), 100u);
  EXPECT_TRUE(top_logprobs(l, 0).empty());
  for (TokenId id : {0, 40, 99}) EXPECT_NEAR(token_logprob(l, id), std::log(p[id]), 1e-5);

  // Large logits stay finite.
  const std::vector<float> big = {1000.0f, 1001.0f};
  EXPECT_NEAR(token_logprob(big, 1), -std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(token_logprob(big, 0), -1.0 - std::log1p(std::exp(-1.0)), 1e-6);
}

}  // namespace
}  // namespace densa
