#include "kernels/activation.h"

#include <cmath>

namespace densa {

void silu_mul(float* gate, const float* up, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

// fp32 exponentials; the normalizing sum is accumulated in double.
void softmax(float* x, int64_t count) {
  if (count <= 0) return;
  float m = x[0];
  for (int64_t i = 1; i < count; ++i) m = x[i] > m ? x[i] : m;
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < count; ++i) x[i] *= inv;
}

}  // namespace densa
