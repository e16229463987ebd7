#pragma once
// Token sampling from one row of logits: temperature -> top-k -> top-p -> min-p -> draw, or
// greedy argmax at temperature 0. Plus log-softmax helpers for OpenAI-style logprobs.
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "core/ids.h"

namespace densa {

struct SamplingParams {
  float temperature = 1.0f;  // <= 0: greedy (argmax, lowest id on exact ties)
  int top_k = 0;             // keep the k most likely tokens; <= 0: off
  float top_p = 1.0f;        // keep the smallest most-likely set with mass >= top_p; >= 1: off
  float min_p = 0.0f;        // drop tokens with p < min_p * p_max; <= 0: off
  uint64_t seed = 0;         // RNG seed: same seed + same logits sequence -> same tokens
};

// Owns the RNG of one request, so a request's tokens depend only on its seed and its logits.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks a token from logits [vocab]. NaN logits count as -inf; if no token has a finite
  // logit the result is the greedy choice (id 0 when all are -inf/NaN).
  // Precondition: !logits.empty().
  TokenId sample(std::span<const float> logits);

  const SamplingParams& params() const { return params_; }

 private:
  // Uniform double in [0, 1) from 53 random bits (the same on every standard library).
  double next_uniform();

  SamplingParams params_;
  std::mt19937_64 rng_;
  // Scratch reused between calls: (probability or scaled logit, id).
  std::vector<std::pair<float, TokenId>> candidates_;
};

// argmax with the lowest id on exact ties (NaN never wins). Precondition: !logits.empty().
TokenId greedy_token(std::span<const float> logits);

// The k highest log-softmax values (natural log) as (id, logprob), most likely first, lower id
// first on ties; k is clamped to [0, vocab].
std::vector<std::pair<TokenId, float>> top_logprobs(std::span<const float> logits, int k);

// log-softmax of one token. Precondition: 0 <= id < logits.size().
float token_logprob(std::span<const float> logits, TokenId id);

}  // namespace densa
