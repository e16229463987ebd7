#pragma once
// TokenConstraint: a per-request rule over which token may come next (a grammar for
// structured outputs or tool calls). The runner asks it for the allowed set before each
// sample, samples among those tokens only, and tells it the token drawn. Its answers depend
// only on the tokens it has accepted, never on the batch, so masked requests keep batch
// invariance and their seeds.
#include <cstdint>
#include <span>

#include "core/ids.h"
#include "core/status.h"

namespace densa {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // Sets bit t (mask[t / 64] >> (t % 64) & 1) for every token t allowed next. `mask` holds
  // ceil(vocab / 64) words, zeroed by the caller. An all-zero mask means no token may follow:
  // the request fails with an error rather than sampling from nothing.
  virtual void fill_allowed(std::span<uint64_t> mask) = 0;

  // Advances past `token`, which the last fill_allowed allowed. An error (a token outside the
  // grammar) fails the request.
  virtual Status accept(TokenId token) = 0;
};

// Copies `logits` into `out` with every token the mask forbids set to -inf. Returns how many
// tokens the mask allows.
int64_t apply_token_mask(std::span<const float> logits, std::span<const uint64_t> mask, std::span<float> out);

}  // namespace densa
