#include "sample/token_constraint.h"

#include <algorithm>
#include <limits>

namespace densa {

int64_t apply_token_mask(std::span<const float> logits, std::span<const uint64_t> mask, std::span<float> out) {
  const size_t vocab = logits.size();
  int64_t allowed = 0;
  for (size_t w = 0; w * 64 < vocab; ++w) {
    const uint64_t bits = w < mask.size() ? mask[w] : 0;
    const size_t end = std::min(vocab, (w + 1) * 64);
    for (size_t t = w * 64; t < end; ++t) {
      const bool on = (bits >> (t - w * 64)) & 1;
      allowed += on;
      out[t] = on ? logits[t] : -std::numeric_limits<float>::infinity();
    }
  }
  return allowed;
}

}  // namespace densa
