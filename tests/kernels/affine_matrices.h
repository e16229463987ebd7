#pragma once
// Affine-row test matrices shared by the affine kernel tests: random weights quantized by the
// reference ggml quantizer of a type, converted to affine rows, and random activations with
// outliers.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/tensor_view.h"
#include "quant/affine_rows.h"
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

// Every ggml type that converts to affine rows.
inline constexpr uint32_t kAffineGgmlTypes[] = {ggml_type::kQ4_K, ggml_type::kQ6_K, ggml_type::kIQ4_XS,
                                                ggml_type::kMXFP4, ggml_type::kQ2_K, ggml_type::kQ3_K,
                                                ggml_type::kQ5_K, ggml_type::kQ5_0, ggml_type::kQ4_1,
                                                ggml_type::kIQ4_NL};

}  // namespace densa::testing
