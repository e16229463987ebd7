#include "kernels/rope.h"

#include <cmath>

#include "core/check.h"

namespace densa {

namespace {
constexpr int kMaxHeadDim = 1024;
}  // namespace

// Angles are formed in double (pos * inv_freq loses ~pos * 2^-24 rad in fp32) and each
// (token, pair) cos/sin is computed once and applied to every head.
void rope_neox(float* x, const int32_t* positions, int64_t n, int num_heads, int head_dim,
               float theta, int rotary_dim) {
  const int rot = rotary_dim == 0 ? head_dim : rotary_dim;
  CHECK(head_dim <= kMaxHeadDim && rot % 2 == 0 && rot > 0 && rot <= head_dim)
      << "rope: head_dim " << head_dim << " rotary_dim " << rotary_dim;
  const int half = rot / 2;
  double inv_freq[kMaxHeadDim / 2];
  for (int k = 0; k < half; ++k) {
    inv_freq[k] = std::pow(static_cast<double>(theta), -2.0 * k / rot);
  }
  float cos_v[kMaxHeadDim / 2], sin_v[kMaxHeadDim / 2];
  for (int64_t t = 0; t < n; ++t) {
    for (int k = 0; k < half; ++k) {
      const double angle = static_cast<double>(positions[t]) * inv_freq[k];
      cos_v[k] = static_cast<float>(std::cos(angle));
      sin_v[k] = static_cast<float>(std::sin(angle));
    }
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * static_cast<int64_t>(head_dim);
      for (int k = 0; k < half; ++k) {
        const float a = v[k], b = v[k + half];
        v[k] = a * cos_v[k] - b * sin_v[k];
        v[k + half] = b * cos_v[k] + a * sin_v[k];
      }
    }
  }
}

}  // namespace densa
