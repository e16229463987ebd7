// The W8A8 kernel for affine-row weights (GGUF K-quants, IQ4, MXFP4 repacked at load, 4-bit and
// 8-bit codes;
// kernels/internal/matmul_affine.h): bit for bit its scalar lane twin
// (ref::matmul_affine_lanes_fp32) for every n and thread count; within fp32 accumulation of the
// double oracle (ref::matmul_affine_x_q8) and within the activation-rounding bound of the
// exact product; extreme codes (0 and 255 in every group), NaN activations; and the fallback
// (CPUs below AVX-512) equal to the fp32 matrix of the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/affine_matrices.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/reference/matmul_quant_ref.h"
#include "quant/affine_rows.h"
#include "quant/dequantize.h"
#include "quant/ggml_blocks.h"

namespace densa {
namespace {

bool have_avx512() { return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16); }

using A8Matrix = testing::AffineMatrix;

A8Matrix make(uint32_t type, int64_t rows, int64_t cols, uint32_t seed, AffineWidth width = AffineWidth::kPacked) {
  return testing::affine_matrix(type, rows, cols, seed, width);
}

std::vector<float> random_x(int64_t n, int64_t cols, uint32_t seed) { return testing::affine_test_x(n, cols, seed); }

const auto& kTypes = testing::kAffineGgmlTypes;

TEST(MatmulAffine, EqualsItsLaneTwinBitForBit) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512 VNNI: the affine8 kernel does not run here";
  ThreadPool pool(3);
  for (uint32_t type : kTypes) {
   for (AffineWidth width : {AffineWidth::kPacked, AffineWidth::kWide}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 256}, {64, 512}, {5, 1024}}) {
      A8Matrix m = make(type, rows, cols, static_cast<uint32_t>(type * 100 + rows), width);
      const std::string what = std::string(ggml_block_format(type)->name) + " as " +
                               std::string(dtype_name(m.view.dtype)) + " " + std::to_string(rows) + "x" +
                               std::to_string(cols);
      SCOPED_TRACE(what);
      // Extreme codes: row 0 all code bytes 0, row 1 all 255 (8-bit: codes 0 and 255, out of
      // every format's range and still exact; 4-bit: the first and last nibble of the table).
      const int64_t rb = dtype_row_bytes(m.view.dtype, cols), code_bytes = affine_code_bytes(m.view.dtype);
      for (int64_t b = 0; b < cols / kAffineBlock; ++b) {
        std::memset(m.bytes.data() + b * dtype_block_bytes(m.view.dtype), 0, static_cast<size_t>(code_bytes));
        std::memset(m.bytes.data() + rb + b * dtype_block_bytes(m.view.dtype), 255, static_cast<size_t>(code_bytes));
      }
      ASSERT_TRUE(matmul_internal::matmul_quant_avx512_supports(m.view));
      for (int64_t n : {1, 2, 3, 4, 7, 17}) {
        std::vector<float> x = random_x(n, cols, static_cast<uint32_t>(n + cols));
        if (n == 7) x[static_cast<size_t>(3 * cols + 40)] = NAN;  // row 3's block 1 is NaN
        std::vector<float> y(static_cast<size_t>(n * rows)), yp(y.size()), twin(y.size());
        ref::matmul_affine_lanes_fp32(m.view, x.data(), n, twin.data());
        matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, m.view, x.data(), n, y.data(), nullptr);
        matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, m.view, x.data(), n, yp.data(), &pool);
        EXPECT_EQ(0, std::memcmp(y.data(), twin.data(), y.size() * 4)) << "n " << n;
        EXPECT_EQ(0, std::memcmp(yp.data(), twin.data(), y.size() * 4)) << "threads, n " << n;
        if (n == 7) {
          for (int64_t r = 0; r < rows; ++r) EXPECT_TRUE(std::isnan(y[static_cast<size_t>(3 * rows + r)])) << r;
        }
      }
    }
   }
  }
}

// The twin is the kernel's own arithmetic; these bound it against independent sums: the double
// oracle of the same rounded activations (fp32 accumulation only) and the exact product of the
// stored values with fp32 x (the activation rounding, sum_k |w_k| amax(x block) / 254).
TEST(MatmulAffine, WithinBoundsOfTheExactProduct) {
  for (uint32_t type : kTypes) {
   for (AffineWidth width : {AffineWidth::kPacked, AffineWidth::kWide}) {
    const int64_t rows = 24, cols = 768, n = 5;
    const A8Matrix m = make(type, rows, cols, type, width);
    SCOPED_TRACE(std::string(ggml_block_format(type)->name) + " as " + std::string(dtype_name(m.view.dtype)));
    const std::vector<float> x = random_x(n, cols, 3);
    std::vector<float> twin(static_cast<size_t>(n * rows)), oracle(twin.size());
    ref::matmul_affine_lanes_fp32(m.view, x.data(), n, twin.data());
    ref::matmul_affine_x_q8(m.view, x.data(), n, oracle.data());
    testing::expect_within_activation_bound(m.view, x, n, twin, oracle);
   }
  }
}

// Below AVX-512 the matrix runs through the fallback, which decodes the exact values: the same
// result as the fp32 matrix holding them.
TEST(MatmulAffine, FallbackEqualsTheFp32MatrixOfTheSameValues) {
  for (uint32_t type : {ggml_type::kQ4_K, ggml_type::kQ6_K, ggml_type::kIQ4_XS}) {
    const int64_t rows = 9, cols = 512, n = 3;
    const A8Matrix m = make(type, rows, cols, 5);
    std::vector<float> f32(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) dequantize_row(m.view, r, f32.data() + r * cols);
    WeightView fv;
    fv.dtype = DType::kF32;
    fv.rows = rows;
    fv.cols = cols;
    fv.data = f32.data();
    const std::vector<float> x = random_x(n, cols, 9);
    std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size());
    matmul_internal::matmul_with_isa(CpuIsa::kScalar, fv, x.data(), n, want.data(), nullptr);
    matmul_internal::matmul_with_isa(CpuIsa::kScalar, m.view, x.data(), n, got.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << ggml_block_format(type)->name;
  }
}

}  // namespace
}  // namespace densa
