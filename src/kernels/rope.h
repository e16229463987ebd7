#pragma once
// Rotary position embedding, rotate-half (NeoX / Hugging Face) pairing: within each head of
// head_dim, element i pairs with i + head_dim/2, angle = pos * theta^(-2i/head_dim).
// x: [n, num_heads, head_dim], rotated in place; positions: [n].
#include <cstdint>

namespace densa {

void rope_neox(float* x, const int32_t* positions, int64_t n, int num_heads, int head_dim,
               float theta);

}  // namespace densa
