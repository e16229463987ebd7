#include "kernels/reference/attention_ref.h"

#include <cmath>
#include <algorithm>
#include <limits>
#include <vector>

#include "quant/fp8.h"

namespace densa::ref {

void attention_one(const float* q, const float* k, const float* v, int32_t pos, int num_heads,
                   int num_kv_heads, int head_dim, float scale, float* out) {
  const int group = num_heads / num_kv_heads;
  const int64_t row = static_cast<int64_t>(num_kv_heads) * head_dim;
  std::vector<double> s(static_cast<size_t>(pos) + 1);
  for (int h = 0; h < num_heads; ++h) {
    const int kvh = h / group;
    double mx = -1e300;
    for (int32_t p = 0; p <= pos; ++p) {
      double dot = 0;
      for (int d = 0; d < head_dim; ++d) dot += double(q[h * head_dim + d]) * k[p * row + kvh * head_dim + d];
      s[p] = dot * scale;
      mx = std::max(mx, s[p]);
    }
    double sum = 0;
    for (int32_t p = 0; p <= pos; ++p) sum += (s[p] = std::exp(s[p] - mx));
    for (int d = 0; d < head_dim; ++d) {
      double acc = 0;
      for (int32_t p = 0; p <= pos; ++p) acc += s[p] * v[p * row + kvh * head_dim + d];
      out[h * head_dim + d] = static_cast<float>(acc / sum);
    }
  }
}

}  // namespace densa::ref

namespace densa::ref {

float kv_fp8_dynamic_scale(const float* row, int head_dim) {
  double amax = 0;
  for (int d = 0; d < head_dim; ++d) amax = std::max(amax, std::fabs(static_cast<double>(row[d])));
  const float s = static_cast<float>(amax) / kFp8E4M3Max;
  return s >= std::numeric_limits<float>::min() ? s : 0.0f;
}

void kv_fp8_round_trip(const float* row, int head_dim, float scale, float* out) {
  for (int d = 0; d < head_dim; ++d)
    out[d] = scale > 0 ? fp8_e4m3_to_f32(fp8_e4m3_from_f32(row[d] / scale)) * scale : 0.0f;
}

}  // namespace densa::ref
