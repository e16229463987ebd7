#pragma once
// Element-wise steps of a layer. SwiGLU gate: gate[i] = silu(gate[i]) * up[i] for i in
// [0, count), in place on gate.
#include <cstdint>

namespace densa {

class ThreadPool;

void silu_mul(float* gate, const float* up, int64_t count);
// The same with the elements split over the pool when there are enough of them (a prefill
// step); an element's result does not depend on its position, so not on the split either.
void silu_mul(float* gate, const float* up, int64_t count, ThreadPool* pool);
// x[i] += y[i] for i in [0, count) (a residual add), split over the pool when there are enough
// elements; each element is one add whatever the split.
void add_into(float* x, const float* y, int64_t count, ThreadPool* pool);
// Softmax over `count` values in place (max-subtracted, fp32).
void softmax(float* x, int64_t count);

}  // namespace densa
