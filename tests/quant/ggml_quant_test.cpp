// GGUF Q8_0 / Q4_0 reference quantizers: block layout and round-trip error bounds through the
// reference dequantizer.
#include "quant/ggml_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "quant/dequantize.h"

namespace densa {
namespace {

void round_trip(DType t) {
  const int64_t cols = 256;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (auto& v : x) v = normal(rng);
  std::vector<uint8_t> q(static_cast<size_t>(dtype_row_bytes(t, cols)));
  if (t == DType::kQ8_0) quantize_row_q8_0(x.data(), cols, q.data());
  else quantize_row_q4_0(x.data(), cols, q.data());
  const WeightView v{.dtype = t, .rows = 1, .cols = cols, .data = q.data()};
  std::vector<float> y(static_cast<size_t>(cols));
  dequantize_row(v, 0, y.data());
  for (int64_t b = 0; b < cols / 32; ++b) {
    uint16_t dh;
    std::memcpy(&dh, q.data() + b * dtype_block_bytes(t), 2);
    const float d = std::fabs(f16_to_f32(dh));
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    EXPECT_NEAR(d, amax / (t == DType::kQ8_0 ? 127.0f : 8.0f), d * 1e-3);
    // Half a step, plus the f16 rounding of d times the largest |q| (127 or 8). Q4_0 maps the
    // largest magnitude to -8, so the opposite side is clamped at +7: up to one full step there.
    const float bound = (t == DType::kQ8_0 ? 0.5f : 1.0f) * d + amax * 1e-3f;
    for (int j = 0; j < 32; ++j) ASSERT_LE(std::fabs(y[b * 32 + j] - x[b * 32 + j]), bound) << b << "," << j;
  }
}

TEST(QuantizeGgml, Q8_0RoundTrip) { round_trip(DType::kQ8_0); }
TEST(QuantizeGgml, Q4_0RoundTrip) { round_trip(DType::kQ4_0); }

TEST(QuantizeGgml, Q4_0LargestMagnitudeMapsToMinusEight) {
  std::vector<float> x(32, 0.0f);
  x[3] = -2.0f;  // d = -2 / -8 = 0.25, q = trunc(-8 + 8.5) = 0 -> value (0 - 8) * 0.25 = -2
  x[20] = 1.0f;
  std::vector<uint8_t> q(18);
  quantize_row_q4_0(x.data(), 32, q.data());
  EXPECT_EQ(q[2 + 3] & 0x0f, 0);
  const WeightView v{.dtype = DType::kQ4_0, .rows = 1, .cols = 32, .data = q.data()};
  std::vector<float> y(32);
  dequantize_row(v, 0, y.data());
  EXPECT_EQ(y[3], -2.0f);
  EXPECT_EQ(y[20], 1.0f);
  EXPECT_EQ(y[0], 0.0f);
}

}  // namespace
}  // namespace densa
