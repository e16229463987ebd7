#include "quant/activation_q8.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace densa {

void activation_q8_quantize(const float* x, int64_t count, int8_t* q, float* scales) {
  for (int64_t b = 0; b * kActQ8Block < count; ++b) {
    const int64_t begin = b * kActQ8Block;
    const int64_t len = std::min(kActQ8Block, count - begin);
    float amax = 0.0f;
    bool finite = true;
    for (int64_t j = 0; j < len; ++j) {
      finite = finite && std::isfinite(x[begin + j]);
      amax = std::max(amax, std::fabs(x[begin + j]));
    }
    const float inv = 127.0f / amax;  // inf for amax < 127 / FLT_MAX (and for 0)
    if (!finite || !std::isfinite(inv)) {
      scales[b] = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
      std::fill(q + begin, q + begin + len, int8_t{0});
      continue;
    }
    scales[b] = amax / 127.0f;
    for (int64_t j = 0; j < len; ++j) {
      const float v = std::nearbyint(x[begin + j] * inv);  // default rounding: half to even
      q[begin + j] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
  }
}

}  // namespace densa
