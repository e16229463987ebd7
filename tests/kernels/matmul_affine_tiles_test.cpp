// Affine rows in 16-row tiles (WeightLayout::kAffineTiles16): the VNNI kernel (every n) and the
// AMX-INT8 GEMM (blocks of 16 x rows, where the CPU grants it) equal their scalar per-group twin
// (ref::matmul_affine_groups_fp32) bit for bit for every affine dtype, so n, threads and the
// AMX / VNNI split change no result (batch invariance); so do the AVX2 kernels, for the tiles
// and for row-major matrices (any row count), through matmul_many's shared and gathered
// preparations too; the twin stays within fp32 accumulation
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
#include "kernels/internal/matmul_quant_avx2.h"
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

bool have_avx2() { return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx2); }

// y of `w` at `isa` on one thread and on a pool, each against the twin, bit for bit.
void expect_isa_equals_twin(CpuIsa isa, const WeightView& w, const std::vector<float>& x, int64_t n, ThreadPool& pool,
                            const std::string& what) {
  std::vector<float> y(static_cast<size_t>(n * w.rows)), yp(y.size()), twin(y.size());
  ref::matmul_affine_groups_fp32(w, x.data(), n, twin.data());
  matmul_internal::matmul_with_isa(isa, w, x.data(), n, y.data(), nullptr);
  matmul_internal::matmul_with_isa(isa, w, x.data(), n, yp.data(), &pool);
  EXPECT_EQ(0, std::memcmp(y.data(), twin.data(), y.size() * 4)) << what << " n " << n;
  EXPECT_EQ(0, std::memcmp(yp.data(), twin.data(), y.size() * 4)) << what << " threads, n " << n;
}

// The AVX2 kernels (CPUs without AVX-512) on the tiles and on the row-major matrix: the twin's
// bits for every affine dtype, both code widths, the extreme codes (rows 0 and 1), n from 1 to
// 100 (4-row register tiles, their 1-row rest, several x blocks) and a NaN x block. Row-major
// matrices of 21 rows take the 8-row blocks and their rest.
TEST(MatmulAffineAvx2, TilesAndRowsEqualTheGroupTwinBitForBit) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  ThreadPool pool(3);
  for (uint32_t type : testing::kAffineGgmlTypes) {
    for (AffineWidth width : {AffineWidth::kPacked, AffineWidth::kWide}) {
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 256}, {48, 512}, {32, 1280}}) {
        const Tiled t = tiled(type, width, rows, cols, static_cast<uint32_t>(type * 5 + rows));
        SCOPED_TRACE(name(type, t.view.dtype) + " " + std::to_string(rows) + "x" + std::to_string(cols));
        ASSERT_TRUE(matmul_internal::matmul_quant_avx2_supports(t.view));
        ASSERT_TRUE(matmul_internal::matmul_quant_avx2_supports(t.rows.view));
        for (int64_t n : {1, 2, 3, 4, 5, 7, 17, 50, 100}) {
          std::vector<float> x = testing::affine_test_x(n, cols, static_cast<uint32_t>(n + cols + 1));
          if (n == 17) x[static_cast<size_t>(3 * cols + 40)] = NAN;  // x row 3's block 1 is NaN
          expect_isa_equals_twin(CpuIsa::kAvx2, t.view, x, n, pool, "tiles");
          expect_isa_equals_twin(CpuIsa::kAvx2, t.rows.view, x, n, pool, "rows");
          if (n == 17) {
            std::vector<float> y(static_cast<size_t>(n * rows));
            matmul_internal::matmul_with_isa(CpuIsa::kAvx2, t.view, x.data(), n, y.data(), nullptr);
            for (int64_t r = 0; r < rows; ++r) EXPECT_TRUE(std::isnan(y[static_cast<size_t>(3 * rows + r)])) << r;
          }
        }
      }
      const testing::AffineMatrix odd = testing::affine_matrix(type, 21, 512, type + 3, width);
      SCOPED_TRACE(name(type, odd.view.dtype) + " 21x512 rows");
      ASSERT_TRUE(matmul_internal::matmul_quant_avx2_supports(odd.view));
      for (int64_t n : {1, 6}) {
        expect_isa_equals_twin(CpuIsa::kAvx2, odd.view, testing::affine_test_x(n, 512, 11), n, pool, "odd rows");
      }
    }
  }
}

// matmul_many at AVX2 with products of one x in weight groups of 16 (Q6_K) and 32 (Q4_K), whose
// prepared rows differ (one term per group), and the same two on gathered rows (an MoE
// expert's tokens): each equals its own product, so no preparation is shared across the two
// group sizes and gathered rows are the rows copied out.
TEST(MatmulAffineAvx2, ManySharesPreparationsOnlyWithinOneGroupSize) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  const int64_t cols = 512, n = 7;
  const Tiled q6 = tiled(ggml_type::kQ6_K, AffineWidth::kPacked, 32, cols, 1);
  const Tiled q4 = tiled(ggml_type::kQ4_K, AffineWidth::kPacked, 48, cols, 2);
  const Tiled q5 = tiled(ggml_type::kQ5_K, AffineWidth::kPacked, 16, cols, 3);
  ASSERT_NE(affine_group(q6.view.dtype), affine_group(q4.view.dtype));
  const std::vector<float> x = testing::affine_test_x(n, cols, 21);
  const std::vector<int32_t> picked = {5, 0, 5, 2};
  std::vector<float> gathered;
  for (int32_t r : picked) gathered.insert(gathered.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
  const auto m = static_cast<int64_t>(picked.size());
  ThreadPool pool(2);
  std::vector<std::vector<float>> out;
  std::vector<MatmulJob> jobs;
  for (const Tiled* t : {&q6, &q4, &q5}) {
    out.emplace_back(static_cast<size_t>(n * t->view.rows));
    jobs.push_back({t->view, x.data(), n, out.back().data()});
  }
  for (const Tiled* t : {&q6, &q4, &q5}) {
    out.emplace_back(static_cast<size_t>(m * t->view.rows));
    MatmulJob j{t->view, x.data(), m, out.back().data()};
    j.x_rows = picked.data();
    j.x_rows_of = n;
    jobs.push_back(j);
  }
  for (size_t k = 0; k < jobs.size(); ++k) jobs[k].y = out[k].data();
  matmul_internal::matmul_many_with_isa(CpuIsa::kAvx2, jobs, &pool);
  for (size_t k = 0; k < jobs.size(); ++k) {
    const bool gather = k >= 3;
    std::vector<float> twin(out[k].size());
    ref::matmul_affine_groups_fp32(jobs[k].w, gather ? gathered.data() : x.data(), jobs[k].n, twin.data());
    EXPECT_EQ(0, std::memcmp(out[k].data(), twin.data(), twin.size() * 4))
        << dtype_name(jobs[k].w.dtype) << (gather ? " gathered" : "");
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

// The scalar level's fallback decodes the tiles: the same bits as for the row-major matrix.
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
