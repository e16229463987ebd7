#pragma once
// Naive oracle for kernels/attention.h: contiguous fp32 K/V, double accumulation.
#include <cstdint>

namespace densa::ref {

// q: [num_heads*head_dim] for one token at position pos; k, v: [pos+1][num_kv_heads*head_dim].
void attention_one(const float* q, const float* k, const float* v, int32_t pos, int num_heads,
                   int num_kv_heads, int head_dim, float scale, float* out);

}  // namespace densa::ref
