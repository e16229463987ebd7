#pragma once
// Rotary position embedding, rotate-half (NeoX / Hugging Face) pairing: within each head of
// head_dim, element i pairs with i + head_dim/2, angle = pos * theta^(-2i/head_dim).
// x: [n, num_heads, head_dim], rotated in place; positions: [n].
// Partial rotary (GLM-4.5's partial_rotary_factor): rotary_dim > 0 rotates only the first
// rotary_dim elements of each head as if the head were rotary_dim wide (pairs i, i +
// rotary_dim/2; angle pos * theta^(-2i/rotary_dim)) and leaves the rest unchanged.
// rotary_dim 0 means head_dim.
#include <cstdint>
#include <vector>

namespace densa {

class ThreadPool;

void rope_neox(float* x, const int32_t* positions, int64_t n, int num_heads, int head_dim,
               float theta, int rotary_dim = 0);

// The cos / sin of every (token, pair) angle of a batch: [n][half] each. A forward pass builds
// it once and rotates q and k of every layer with it, instead of recomputing the same
// transcendentals per layer; rope_neox is exactly build + apply.
struct RopeTable {
  int head_dim = 0;
  int half = 0;  // rotary_dim / 2
  int64_t n = 0;
  std::vector<float> cos, sin;
};
void rope_table_build(RopeTable& t, const int32_t* positions, int64_t n, int head_dim, float theta,
                      int rotary_dim = 0);
// x: [t.n, num_heads, t.head_dim], rotated in place.
void rope_neox_apply(float* x, const RopeTable& t, int num_heads);
// The same with the tokens split over the pool when there are enough of them (a prefill step);
// a token's rotation does not depend on the split.
void rope_neox_apply(float* x, const RopeTable& t, int num_heads, ThreadPool* pool);

}  // namespace densa
