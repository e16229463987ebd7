// Affine rows in 16-row tiles (WeightLayout::kAffineTiles16): the VNNI kernel (every n) and the
// AMX-INT8 GEMM (blocks of 16 x rows, where the CPU grants it) equal their scalar per-group twin
// (ref::matmul_affine_groups_fp32) bit for bit for every affine dtype, so n, threads and the
// AMX / VNNI split change no result (batch invariance); the twin stays within fp32 accumulation
// of the double oracle and within the activation-rounding bound of the exact product; and the
// fallback reads the tiles as the exact values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/affine_matrices.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/reference/matmul_quant_ref.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"
#include "quant/dequantize.h"
#include "test_util.h"

namespace densa {
namespace {

bool have_avx512() { return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16); }

struct Tiled {
  testing::AffineMatrix rows;
  std::vector<uint8_t> storage;
  WeightView view;
};

// A tiled copy of an affine matrix whose row 0 has every code byte 0 and row 1 every code byte
// 255 (the extreme codes of every format, 8-bit or as nibbles).
Tiled tiled(uint32_t type, AffineWidth width, int64_t rows, int64_t cols, uint32_t seed) {
  Tiled t{testing::affine_matrix(type, rows, cols, seed, width), {}, {}};
  const DType d = t.rows.view.dtype;
  const int64_t rb = dtype_row_bytes(d, cols);
  for (int64_t b = 0; b < cols / kAffineBlock; ++b) {
    std::memset(t.rows.bytes.data() + b * dtype_block_bytes(d), 0, static_cast<size_t>(affine_code_bytes(d)));
    std::memset(t.rows.bytes.data() + rb + b * dtype_block_bytes(d), 255, static_cast<size_t>(affine_code_bytes(d)));
  }
  t.view = affine_tile16(t.rows.view, testing::aligned_bytes(t.storage, t.rows.view.bytes()));
  return t;
}

std::string name(uint32_t type, DType d) {
  return std::string(ggml_block_format(type)->name) + " as " + std::string(dtype_name(d));
}

TEST(MatmulAffineTiles, EqualTheirGroupTwinBitForBit) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512 VNNI: the affine tile kernels do not run here";
  std::vector<bool> amx_modes = {false};
  if (cpu_use_amx() && cpu_has_amx_int8()) amx_modes.push_back(true);
  ThreadPool pool(3);
  for (uint32_t type : testing::kAffineGgmlTypes) {
    for (AffineWidth width : {AffineWidth::kPacked, AffineWidth::kWide}) {
      // 1,280 columns: one whole 1,024-column AMX chunk and a partial one.
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 256}, {48, 512}, {32, 1280}}) {
        const Tiled t = tiled(type, width, rows, cols, static_cast<uint32_t>(type * 7 + rows));
        SCOPED_TRACE(name(type, t.view.dtype) + " " + std::to_string(rows) + "x" + std::to_string(cols));
        ASSERT_TRUE(matmul_internal::matmul_quant_avx512_supports(t.view));
        for (bool amx : amx_modes) {
          WeightView v = t.view;
          v.amx = testing::amx_use(amx);
          for (int64_t n : {1, 2, 5, 16, 17, 33, 50}) {
            std::vector<float> x = testing::affine_test_x(n, cols, static_cast<uint32_t>(n + cols));
            if (n == 17) x[static_cast<size_t>(3 * cols + 40)] = NAN;  // x row 3's block 1 is NaN
            std::vector<float> y(static_cast<size_t>(n * rows)), yp(y.size()), twin(y.size());
            ref::matmul_affine_groups_fp32(t.view, x.data(), n, twin.data());
            matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, v, x.data(), n, y.data(), nullptr);
            matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, v, x.data(), n, yp.data(), &pool);
            EXPECT_EQ(0, std::memcmp(y.data(), twin.data(), y.size() * 4)) << "amx " << amx << " n " << n;
            EXPECT_EQ(0, std::memcmp(yp.data(), twin.data(), y.size() * 4)) << "threads, amx " << amx << " n " << n;
            if (n == 17) {
              for (int64_t r = 0; r < rows; ++r) EXPECT_TRUE(std::isnan(y[static_cast<size_t>(3 * rows + r)])) << r;
            }
          }
        }
      }
    }
  }
}

// The twin against independent sums: the double oracle of the same rounded activations (fp32
// accumulation only) and the exact product of the stored values with fp32 x.
TEST(MatmulAffineTiles, TwinWithinBoundsOfTheExactProduct) {
  for (uint32_t type : testing::kAffineGgmlTypes) {
    const int64_t rows = 16, cols = 768, n = 4;
    const Tiled t = tiled(type, AffineWidth::kPacked, rows, cols, type);
    SCOPED_TRACE(name(type, t.view.dtype));
    const std::vector<float> x = testing::affine_test_x(n, cols, 3);
    std::vector<float> twin(static_cast<size_t>(n * rows)), oracle(twin.size());
    ref::matmul_affine_groups_fp32(t.view, x.data(), n, twin.data());
    ref::matmul_affine_x_q8(t.view, x.data(), n, oracle.data());
    testing::expect_within_activation_bound(t.view, x, n, twin, oracle);
  }
}

// Below AVX-512 the fallback decodes the tiles: the same bits as for the row-major matrix.
TEST(MatmulAffineTiles, FallbackReadsTheTilesAsTheRows) {
  for (uint32_t type : {ggml_type::kQ4_K, ggml_type::kQ6_K, ggml_type::kMXFP4}) {
    const int64_t rows = 32, cols = 512, n = 3;
    const Tiled t = tiled(type, AffineWidth::kPacked, rows, cols, 5);
    const std::vector<float> x = testing::affine_test_x(n, cols, 9);
    std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size());
    matmul_internal::matmul_with_isa(CpuIsa::kScalar, t.rows.view, x.data(), n, want.data(), nullptr);
    matmul_internal::matmul_with_isa(CpuIsa::kScalar, t.view, x.data(), n, got.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << ggml_block_format(type)->name;
  }
}

}  // namespace
}  // namespace densa
