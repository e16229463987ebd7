#include "kernels/reference/activation_ref.h"

#include <cmath>

namespace densa::ref {

void silu_mul(float* gate, const float* up, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double g = gate[i];
    gate[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void softmax(float* x, int64_t count) {
  if (count <= 0) return;
  double m = x[0];
  for (int64_t i = 1; i < count; ++i) m = x[i] > m ? x[i] : m;
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += std::exp(x[i] - m);
  for (int64_t i = 0; i < count; ++i) x[i] = static_cast<float>(std::exp(x[i] - m) / sum);
}

}  // namespace densa::ref
