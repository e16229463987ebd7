// kernels/rows_combination: every ISA level against the scalar loop bit for bit (the contract
// fixes each element's order of fused multiply-adds), and against a double-precision sum, over
// shapes with whole 256-column blocks, single vectors and masked tails, strided rows of x and y,
// and batches where each row must equal that row alone.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/internal/rows_combination_isa.h"
#include "kernels/rows_combination.h"
#include "test_util.h"

namespace densa {
namespace {

TEST(RowsCombination, EveryIsaMatchesTheScalarLoopBitForBitAndTheDoubleSum) {
  const int64_t shapes[][2] = {{1, 1}, {3, 5}, {7, 16}, {16, 17}, {32, 255}, {128, 256}, {33, 257}, {128, 512}, {9, 530},
                                 {512, 128}, {5, 200}};
  const int64_t n = 4, x_stride_pad = 3, y_stride_pad = 5;
  int compared = 0;
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    const std::vector<float> w = testing::normal_floats(static_cast<size_t>(rows * cols), 1 + static_cast<uint32_t>(rows * cols));
    const int64_t xs = rows + x_stride_pad, ys = cols + y_stride_pad;
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(n * xs), 99);
    std::vector<float> want(static_cast<size_t>(n * ys), -7.0f);
    rows_combination_internal::rows_combination_scalar(w.data(), rows, cols, x.data(), xs, n, want.data(), ys);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t c = 0; c < cols; ++c) {
        double ref = 0, mag = 0;
        for (int64_t r = 0; r < rows; ++r) {
          ref += static_cast<double>(x[t * xs + r]) * w[r * cols + c];
          mag += std::fabs(static_cast<double>(x[t * xs + r]) * w[r * cols + c]);
        }
        ASSERT_LE(std::fabs(want[t * ys + c] - ref), 1e-6 * mag + 1e-30) << rows << "x" << cols << " t " << t;
      }
      for (int64_t c = cols; c < ys; ++c) ASSERT_EQ(want[t * ys + c], -7.0f) << "wrote past the row";
    }
    for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Bf16}) {
      if (static_cast<int>(isa) > static_cast<int>(cpu_isa_hardware())) continue;
      std::vector<float> got(want.size(), -7.0f);
      rows_combination_internal::rows_combination_with_isa(isa, w.data(), rows, cols, x.data(), xs, n, got.data(), ys);
      ASSERT_EQ(got, want) << cpu_isa_name(isa) << " " << rows << "x" << cols;
      // Row 2 alone: the same bits as inside the batch.
      std::vector<float> one(static_cast<size_t>(cols));
      rows_combination_internal::rows_combination_with_isa(isa, w.data(), rows, cols, x.data() + 2 * xs, xs, 1,
                                                           one.data(), cols);
      for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(one[c], want[2 * ys + c]) << cpu_isa_name(isa);
      ++compared;
    }
  }
  EXPECT_GE(compared, static_cast<int>(std::size(shapes))) << "no ISA level ran";
}

}  // namespace
}  // namespace densa
