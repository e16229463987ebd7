#pragma once
// Rotary position embedding, rotate-half (NeoX / Hugging Face) pairing: within each head of
// head_dim, element i pairs with i + head_dim/2, angle = pos * theta^(-2i/head_dim).
// x: [n, num_heads, head_dim], rotated in place; positions: [n].
// Partial rotary (GLM-4.5's partial_rotary_factor): rotary_dim > 0 rotates only the first
// rotary_dim elements of each head as if the head were rotary_dim wide (pairs i, i +
// rotary_dim/2; angle pos * theta^(-2i/rotary_dim)) and leaves the rest unchanged.
// rotary_dim 0 means head_dim.
#include <cstdint>

namespace densa {

void rope_neox(float* x, const int32_t* positions, int64_t n, int num_heads, int head_dim,
               float theta, int rotary_dim = 0);

}  // namespace densa
