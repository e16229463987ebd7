// FP8 block-scaled weights: dequantization bit-exact against an independent decoder written
// here (e4m3 by formula, scale looked up by block), quantize -> dequantize error bounds, and
// the matmul fallback against ref::matmul.
#include "quant/fp8_block.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/reference/matmul_ref.h"
#include "quant/dequantize.h"

namespace densa {
namespace {

// sign * 2^(e-7) * (1 + m/8); subnormal sign * m * 2^-9; NaN codes excluded by the callers.
double e4m3_formula(uint8_t code) {
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int e = (code >> 3) & 0xf, m = code & 7;
  return e == 0 ? sign * m * std::ldexp(1.0, -9) : sign * std::ldexp(1.0, e - 7) * (1.0 + m / 8.0);
}

struct RandomFp8 {
  int64_t rows, cols;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  WeightView view;
  RandomFp8(int64_t r, int64_t c, uint32_t seed) : rows(r), cols(c) {
    std::mt19937 rng(seed);
    codes.resize(static_cast<size_t>(r * c));
    for (auto& b : codes) {
      do b = static_cast<uint8_t>(rng()); while ((b & 0x7f) == 0x7f);
    }
    scales.resize(static_cast<size_t>(fp8_block_scale_rows(r) * fp8_block_scale_cols(c)));
    std::uniform_real_distribution<float> u(-12.0f, 2.0f);
    for (auto& s : scales) s = std::exp2(u(rng));
    view = fp8_block_view(codes.data(), scales.data(), r, c);
  }
};

TEST(Fp8Block, DequantizeBitExactAgainstIndependentDecoder) {
  // 200 x 300: partial blocks in both directions (scales [2, 3]).
  RandomFp8 m(200, 300, 7);
  std::vector<float> row(300);
  const int64_t scols = (m.cols + 127) / 128;
  for (int64_t r = 0; r < m.rows; ++r) {
    dequantize_row(m.view, r, row.data());
    for (int64_t c = 0; c < m.cols; ++c) {
      const float expect = static_cast<float>(e4m3_formula(m.codes[r * m.cols + c]) * m.scales[(r / 128) * scols + c / 128]);
      uint32_t a, b;
      std::memcpy(&a, &row[c], 4);
      std::memcpy(&b, &expect, 4);
      ASSERT_EQ(a, b) << "r " << r << " c " << c;
    }
  }
  // A sub-range decodes the same values.
  std::vector<float> part(64);
  dequantize_row_range(m.view, 131, 160, 64, part.data());
  dequantize_row(m.view, 131, row.data());
  EXPECT_EQ(0, std::memcmp(part.data(), row.data() + 160, 64 * 4));
}

TEST(Fp8Block, QuantizeRoundTripErrorBound) {
  const int64_t rows = 256, cols = 384;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& v : w) v = normal(rng);
  w[5] = 0.5f;  // one outlier: its block's scale grows, the others keep theirs
  std::vector<uint8_t> codes(w.size());
  std::vector<float> scales(static_cast<size_t>(2 * 3));
  fp8_block_quantize(w.data(), rows, cols, codes, scales);
  EXPECT_FLOAT_EQ(scales[0], 0.5f / 448.0f);
  const WeightView v = fp8_block_view(codes.data(), scales.data(), rows, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(v, r, row.data());
    for (int64_t c = 0; c < cols; ++c) {
      const float s = scales[(r / 128) * 3 + c / 128];
      const float x = w[r * cols + c];
      // Normal range: half an ulp = 2^-4 relative; subnormal range: half the step 2^-9.
      const float bound = std::max(std::fabs(x) * 0.0625f, s * std::ldexp(1.0f, -10)) * 1.0001f;
      ASSERT_LE(std::fabs(row[c] - x), bound) << r << "," << c;
    }
  }
  // The block maximum is representable exactly (448 * scale).
  dequantize_row(v, 0, row.data());
  EXPECT_FLOAT_EQ(row[5], 0.5f);
}

TEST(Fp8Block, AllZeroBlockHasUnitScale) {
  std::vector<float> w(128 * 128, 0.0f);
  std::vector<uint8_t> codes(w.size());
  std::vector<float> scales(1);
  fp8_block_quantize(w.data(), 128, 128, codes, scales);
  EXPECT_EQ(scales[0], 1.0f);
  for (uint8_t c : codes) ASSERT_EQ(c, 0);
}

// matmul with FP8 weights == ref::matmul on the dequantized weights within the kernels' stated
// bound: the AVX-512 path rounds x to bf16 once per call (W8A16), so
// |y - ref| <= 2^-8 * sum_k |w x| (+ fp32 rounding); the exact fallback is far inside it.
// Batch and thread invariant bit for bit.
TEST(Fp8BlockMatmul, MatchesReferenceAndIsBatchInvariant) {
  RandomFp8 m(160, 384, 11);
  const int64_t n = 9;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * m.cols));
  for (auto& v : x) v = normal(rng);
  std::vector<float> y(static_cast<size_t>(n * m.rows)), yref(y.size()), y1(static_cast<size_t>(m.rows));
  matmul(m.view, x.data(), n, y.data(), nullptr);
  ref::matmul(m.view, x.data(), n, yref.data());
  std::vector<float> wrow(static_cast<size_t>(m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    dequantize_row(m.view, r, wrow.data());
    for (int64_t i = 0; i < n; ++i) {
      double mag = 0;
      for (int64_t k = 0; k < m.cols; ++k) mag += std::fabs(static_cast<double>(wrow[k]) * x[i * m.cols + k]);
      ASSERT_LE(std::fabs(y[i * m.rows + r] - yref[i * m.rows + r]), (0x1p-8 + 1e-5) * mag + 1e-30) << i << "," << r;
    }
  }
  ThreadPool pool(3);
  std::vector<float> yp(y.size());
  matmul(m.view, x.data(), n, yp.data(), &pool);
  EXPECT_EQ(0, std::memcmp(y.data(), yp.data(), y.size() * 4));
  for (int64_t i = 0; i < n; ++i) {
    matmul(m.view, x.data() + i * m.cols, 1, y1.data(), nullptr);
    ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + i * m.rows, y1.size() * 4)) << "row " << i;
  }
}

}  // namespace
}  // namespace densa
