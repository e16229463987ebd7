#pragma once
// Affine-row test matrices shared by the affine kernel tests: random weights quantized by the
// reference ggml quantizer of a type, converted to affine rows, and random activations with
// outliers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/tensor_view.h"
#include "quant/affine_rows.h"
#include "quant/dequantize.h"
#include "quant/ggml_blocks.h"

namespace densa::testing {

struct AffineMatrix {
  std::vector<uint8_t> bytes;
  WeightView view;
};

// rows x cols of ggml type `type` from the reference quantizer, converted to affine rows of `width`.
inline AffineMatrix affine_matrix(uint32_t type, int64_t rows, int64_t cols, uint32_t seed,
                                  AffineWidth width = AffineWidth::kPacked) {
  const GgmlBlockFormat& fm = *ggml_block_format(type);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> src(static_cast<size_t>(rows * cols));
  for (float& v : src) v = nd(rng);
  std::vector<uint8_t> blocks(static_cast<size_t>(rows * cols / fm.block_elems * fm.block_bytes));
  fm.quantize(src.data(), rows * cols, blocks.data());
  AffineMatrix m;
  const DType t = *affine_dtype_for_ggml(type, width);
  m.bytes.resize(static_cast<size_t>(rows * dtype_row_bytes(t, cols)));
  EXPECT_TRUE(affine_from_ggml(type, t, blocks.data(), rows, cols, m.bytes.data()));
  m.view.dtype = t;
  m.view.rows = rows;
  m.view.cols = cols;
  m.view.data = m.bytes.data();
  return m;
}

// n x cols standard normal activations; row 1 (when n > 1) has 40x outliers every 97 columns.
inline std::vector<float> affine_test_x(int64_t n, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = nd(rng);
  for (int64_t k = 0; k < cols && n > 1; k += 97) x[static_cast<size_t>(cols + k)] *= 40.0f;
  return x;
}

// For the product of x ([n, cols]) with the weights w (any affine layout): `twin` (a kernel's
// fp32 twin) within fp32 accumulation of `oracle` (the double sum of the same rounded
// activations) and within the activation-rounding bound of the exact product of the stored
// values with fp32 x: sum_k |w_k| * amax(x block of k) / 254.
inline void expect_within_activation_bound(const WeightView& w, const std::vector<float>& x, int64_t n,
                                           const std::vector<float>& twin, const std::vector<float>& oracle) {
  const int64_t rows = w.rows, cols = w.cols;
  std::vector<float> wr(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(w, r, wr.data());
    for (int64_t i = 0; i < n; ++i) {
      double exact = 0, mag = 0, bound = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double xv = x[static_cast<size_t>(i * cols + k)];
        exact += static_cast<double>(wr[k]) * xv;
        mag += std::fabs(static_cast<double>(wr[k]) * xv);
        double amax = 0;
        for (int64_t j = k / 32 * 32; j < k / 32 * 32 + 32; ++j) {
          amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(i * cols + j)])));
        }
        bound += std::fabs(static_cast<double>(wr[k])) * amax / 254.0;
      }
      const float got = twin[static_cast<size_t>(i * rows + r)];
      EXPECT_NEAR(got, oracle[static_cast<size_t>(i * rows + r)], 1e-5 * mag + 1e-6) << r << "," << i;
      EXPECT_NEAR(got, exact, bound * 1.001 + 1e-5 * mag + 1e-6) << r << "," << i;
    }
  }
}

// Every ggml type that converts to affine rows.
inline constexpr uint32_t kAffineGgmlTypes[] = {ggml_type::kQ4_K, ggml_type::kQ6_K, ggml_type::kIQ4_XS,
                                                ggml_type::kMXFP4, ggml_type::kQ2_K, ggml_type::kQ3_K,
                                                ggml_type::kQ5_K, ggml_type::kQ5_0, ggml_type::kQ4_1,
                                                ggml_type::kIQ4_NL};

}  // namespace densa::testing
