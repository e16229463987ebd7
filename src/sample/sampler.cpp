#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace densa {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// NaN counts as -inf everywhere.
float clean(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// Largest value first; lower id first on ties.
bool more_likely(const std::pair<float, TokenId>& a, const std::pair<float, TokenId>& b) {
  if (a.first != b.first) return a.first > b.first;
  return a.second < b.second;
}

float max_logit(std::span<const float> logits) {
  float m = kNegInf;
  for (float l : logits) m = std::max(m, clean(l));
  return m;
}

// log(sum(exp(logits - max))) in double.
double log_sum_exp_shifted(std::span<const float> logits, float max) {
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(clean(l)) - max);
  return std::log(sum);
}

}  // namespace

TokenId greedy_token(std::span<const float> logits) {
  CHECK(!logits.empty()) << "empty logits";
  size_t best = 0;
  float best_logit = clean(logits[0]);
  for (size_t i = 1; i < logits.size(); ++i) {
    const float l = clean(logits[i]);
    if (l > best_logit) {
      best = i;
      best_logit = l;
    }
  }
  return static_cast<TokenId>(best);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

double Sampler::next_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

TokenId Sampler::sample(std::span<const float> logits) {
  CHECK(!logits.empty()) << "empty logits";
  if (params_.temperature <= 0.0f || params_.top_k == 1) return greedy_token(logits);
  const float max = max_logit(logits);
  if (!std::isfinite(max)) return greedy_token(logits);  // all -inf, or a +inf logit wins

  // Temperature: candidates hold (logit - max) / T <= 0, so exp() below never overflows.
  const float inv_t = 1.0f / params_.temperature;
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = clean(logits[i]);
    if (l == kNegInf) continue;
    candidates_.emplace_back((l - max) * inv_t, static_cast<TokenId>(i));
  }

  bool sorted = false;
  const auto k = static_cast<size_t>(std::max(params_.top_k, 0));
  if (k > 0 && k < candidates_.size()) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(), more_likely);
    candidates_.resize(k);
    sorted = true;
  }
  if (params_.top_p < 1.0f && !sorted) {
    std::sort(candidates_.begin(), candidates_.end(), more_likely);
    sorted = true;
  }

  // Unnormalised probabilities; the most likely candidate has exactly exp(0) = 1.
  double total = 0.0;
  for (auto& c : candidates_) {
    c.first = std::exp(c.first);
    total += c.first;
  }

  if (params_.top_p < 1.0f) {
    // Smallest prefix (in likelihood order) whose mass reaches top_p; at least one token.
    const double target = static_cast<double>(params_.top_p) * total;
    double mass = 0.0;
    size_t keep = 0;
    while (keep < candidates_.size()) {
      mass += candidates_[keep++].first;
      if (mass >= target) break;
    }
    candidates_.resize(keep);
  }

  if (params_.min_p > 0.0f) {
    // p_max is 1 in these unnormalised units, so the cut-off is min_p itself.
    const float cutoff = params_.min_p;
    std::erase_if(candidates_, [cutoff](const auto& c) { return c.first < cutoff; });
  }
  if (candidates_.empty()) return greedy_token(logits);  // min_p > 1

  total = 0.0;
  for (const auto& c : candidates_) total += c.first;
  double u = next_uniform() * total;
  for (const auto& c : candidates_) {
    u -= c.first;
    if (u < 0.0) return c.second;
  }
  return candidates_.back().second;  // rounding left u at ~0
}

std::vector<std::pair<TokenId, float>> top_logprobs(std::span<const float> logits, int k) {
  const size_t n = std::min(static_cast<size_t>(std::max(k, 0)), logits.size());
  std::vector<std::pair<TokenId, float>> out;
  if (n == 0) return out;
  const float max = max_logit(logits);
  const double lse = std::isfinite(max) ? log_sum_exp_shifted(logits, max) : 0.0;
  std::vector<std::pair<float, TokenId>> order(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) order[i] = {clean(logits[i]), static_cast<TokenId>(i)};
  std::partial_sort(order.begin(), order.begin() + n, order.end(), more_likely);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const double lp = std::isfinite(max) ? static_cast<double>(order[i].first) - max - lse : kNegInf;
    out.emplace_back(order[i].second, static_cast<float>(lp));
  }
  return out;
}

float token_logprob(std::span<const float> logits, TokenId id) {
  CHECK(id >= 0 && static_cast<size_t>(id) < logits.size()) << "token " << id;
  const float max = max_logit(logits);
  if (!std::isfinite(max)) return kNegInf;
  return static_cast<float>(static_cast<double>(clean(logits[id])) - max - log_sum_exp_shifted(logits, max));
}

}  // namespace densa
