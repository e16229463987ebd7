#pragma once
// SwiGLU gate: gate[i] = silu(gate[i]) * up[i] for i in [0, count), in place on gate.
#include <cstdint>

namespace densa {

void silu_mul(float* gate, const float* up, int64_t count);
// Softmax over `count` values in place (max-subtracted, fp32).
void softmax(float* x, int64_t count);

}  // namespace densa
