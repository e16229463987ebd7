#include "kernels/reference/rope_ref.h"

#include <cmath>

namespace densa::ref {

void rope_neox(float* x, const int32_t* positions, int64_t n, int num_heads, int head_dim, float theta,
               int rotary_dim) {
  const int rot = rotary_dim == 0 ? head_dim : rotary_dim;
  const int half = rot / 2;
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * static_cast<int64_t>(head_dim);
      for (int k = 0; k < half; ++k) {
        const double angle = positions[t] * std::pow(static_cast<double>(theta), -2.0 * k / rot);
        const double a = v[k], b = v[k + half];
        v[k] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
        v[k + half] = static_cast<float>(b * std::cos(angle) + a * std::sin(angle));
      }
    }
  }
}

}  // namespace densa::ref
