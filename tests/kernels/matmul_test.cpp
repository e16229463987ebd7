// matmul vs its double-precision reference for every weight dtype and every ISA level this
// CPU has, plus the batch-invariance contract (bit-equal results whatever n, the other rows of
// x, or the thread count).
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/reference/matmul_ref.h"
#include "quant/dequantize.h"
#include "test_util.h"

namespace densa {
namespace {

using matmul_internal::matmul_with_isa;

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0};

// The BF16 / F16 paths this CPU runs at the AVX-512 level (testing::amx_modes): fp32
// activations on FMAs (false) and, with AMX-BF16 on the CPU, x rounded to bf16 on AMX tiles
// (true; F16 as its bf16 high parts plus the remainders, exact), chosen per matrix by
// WeightView::amx = testing::amx_use(mode). The other ISA levels always take the first.
std::vector<bool> bf16_amx_modes() { return testing::amx_modes(); }

// Whether `dtype` with WeightView::amx `amx` runs on AMX tiles with x rounded to bf16 at `isa`
// (BF16 and F16 at the AVX-512 level, matmul_quant_bf16_amx).
bool half_on_amx(CpuIsa isa, DType dtype, AmxUse amx) {
  return (dtype == DType::kBF16 || dtype == DType::kF16) && isa == CpuIsa::kAvx512Bf16 &&
         matmul_internal::matmul_quant_bf16_amx(amx);
}

std::vector<CpuIsa> available_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Bf16}) {
    if (static_cast<int>(isa) <= static_cast<int>(cpu_isa_hardware())) out.push_back(isa);
  }
  return out;
}

// Random weights in `dtype`: plain types from N(0, 1) rounded to the type; Q8_0 / Q4_0 with a
// random f16 scale per block and random quants.
struct RandomWeights {
  std::vector<uint8_t> bytes;
  WeightView view;

  RandomWeights(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    std::uniform_int_distribution<int> byte(0, 255);
    bytes.resize(static_cast<size_t>(rows * dtype_row_bytes(dtype, cols)));
    uint8_t* p = bytes.data();
    const int64_t count = rows * cols;
    switch (dtype) {
      case DType::kF32:
        for (int64_t k = 0; k < count; ++k) {
          const float v = normal(rng);
          std::memcpy(p + 4 * k, &v, 4);
        }
        break;
      case DType::kF16:
      case DType::kBF16:
        for (int64_t k = 0; k < count; ++k) {
          const float v = normal(rng);
          const uint16_t h = dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
          std::memcpy(p + 2 * k, &h, 2);
        }
        break;
      case DType::kQ8_0:
      case DType::kQ4_0: {
        const int64_t block_bytes = dtype_block_bytes(dtype);
        for (int64_t b = 0; b < count / 32; ++b) {
          uint8_t* blk = p + b * block_bytes;
          const uint16_t d = f32_to_f16(scale(rng));
          std::memcpy(blk, &d, 2);
          for (int64_t j = 2; j < block_bytes; ++j) blk[j] = static_cast<uint8_t>(byte(rng));
        }
        break;
      }
      case DType::kFP8E4M3:
      case DType::kI4:
      case DType::kI8:
      case DType::kI32:
      case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4: case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4:
      case DType::kU8: ADD_FAILURE() << "no random weights for " << dtype_name(dtype); break;
    }
    view = WeightView{.dtype = dtype, .rows = rows, .cols = cols, .data = bytes.data()};
  }
};

std::vector<float> random_x(int64_t n, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = normal(rng);
  return x;
}

// sum_k |w[r, k] * x[i, k]|, the scale of the rounding error of any fp32 dot product.
std::vector<double> abs_dot(const WeightView& w, const std::vector<float>& x, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n * w.rows));
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (int64_t k = 0; k < w.cols; ++k) s += std::fabs(static_cast<double>(row[k]) * x[i * w.cols + k]);
      out[i * w.rows + r] = s;
    }
  }
  return out;
}

std::string label(CpuIsa isa, DType dtype, AmxUse use) {
  const bool amx = half_on_amx(isa, dtype, use);
  return std::string(cpu_isa_name(isa)) + "/" + std::string(dtype_name(dtype)) + (amx ? " (amx)" : "");
}

// Tolerance: a chain of at most cols/4 fp32 additions plus a short lane tree, so
// |y - ref| <= (cols/4 + 8) * 2^-24 * sum|w x| (the standard a-priori bound). BF16 on AMX
// tiles (and F16, split exactly into two bf16 parts) rounds x to bf16 first (round to nearest
// even) and nothing else: its twin is the same double reference on bf16(x), with the same
// bound (the tile unit's fp32 sums are as short).
void expect_matches_reference(CpuIsa isa, DType dtype, int64_t rows, int64_t cols, int64_t n,
                              uint32_t seed, AmxUse amx) {
  RandomWeights w(dtype, rows, cols, seed);
  w.view.amx = amx;
  std::vector<float> x = random_x(n, cols, seed + 1);
  std::vector<float> y(static_cast<size_t>(n * rows), NAN), want(y.size());
  matmul_with_isa(isa, w.view, x.data(), n, y.data(), nullptr);
  if (half_on_amx(isa, dtype, amx)) {
    for (float& v : x) v = bf16_to_f32(f32_to_bf16(v));
  }
  ref::matmul(w.view, x.data(), n, want.data());
  const std::vector<double> scale = abs_dot(w.view, x, n);
  const double unit = std::ldexp(1.0, -24) * (static_cast<double>(cols) / 4 + 8);
  for (size_t k = 0; k < y.size(); ++k) {
    ASSERT_LE(std::fabs(static_cast<double>(y[k]) - want[k]), unit * scale[k] + 1e-30)
        << label(isa, dtype, w.view.amx) << " rows=" << rows << " cols=" << cols << " n=" << n << " at " << k;
  }
}

TEST(MatmulTest, MatchesReferenceEveryDtypeAndIsa) {
  for (bool amx : bf16_amx_modes()) {
    const AmxUse use = testing::amx_use(amx);
    for (CpuIsa isa : available_isas()) {
    for (DType dtype : kDtypes) {
      expect_matches_reference(isa, dtype, 64, 256, 4, 1, use);
      expect_matches_reference(isa, dtype, 40, 4096, 2, 2, use);
      expect_matches_reference(isa, dtype, 16, 32, 1, 3, use);
    }
  }
  }
}

// BF16 / F16 on AMX take x in blocks of 1 MiB of B tiles (512 tokens at 1,024 columns): 530 tokens
// cross a block, and 1,000 columns end in a partial 64-column step.
TEST(MatmulTest, HalfPrecisionManyTokensCrossXBlocks) {
  for (bool amx : bf16_amx_modes()) {
    const AmxUse use = testing::amx_use(amx);
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      expect_matches_reference(CpuIsa::kAvx512Bf16 <= cpu_isa_hardware() ? CpuIsa::kAvx512Bf16 : cpu_isa_hardware(),
                               dtype, 40, 1000, 530, 31, use);
    }
  }
}

TEST(MatmulTest, OddShapes) {
  uint32_t seed = 100;
  for (bool amx : bf16_amx_modes()) {
  const AmxUse use = testing::amx_use(amx);
  for (CpuIsa isa : available_isas()) {
    for (DType dtype : kDtypes) {
      for (int64_t rows : {1, 3, 5, 17, 33}) {
        for (int64_t n = 1; n <= 9; ++n) expect_matches_reference(isa, dtype, rows, 96, n, ++seed, use);
      }
    }
    // Plain dtypes accept any cols: a partial last block takes the zero-padded path.
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (int64_t cols : {1, 7, 31, 45, 71, 100}) {
        for (int64_t n : {1, 2, 5}) expect_matches_reference(isa, dtype, 19, cols, n, ++seed, use);
      }
    }
  }
  }
}

TEST(MatmulTest, DefaultDispatchUsesCpuIsa) {
  RandomWeights w(DType::kBF16, 21, 128, 7);
  const std::vector<float> x = random_x(3, 128, 8);
  std::vector<float> a(3 * 21), b(3 * 21);
  matmul(w.view, x.data(), 3, a.data(), nullptr);
  matmul_with_isa(cpu_isa(), w.view, x.data(), 3, b.data(), nullptr);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

// A job marked f32_x (the MoE router) keeps fp32 activations for BF16 weights: the bits of the
// exact path whichever path BF16 matrices take; unmarked jobs in the same call take theirs.
TEST(MatmulTest, F32xJobKeepsExactBf16Path) {
  RandomWeights w(DType::kBF16, 24, 192, 21);
  const std::vector<float> x = random_x(5, 192, 22);
  std::vector<float> exact(5 * 24), marked(5 * 24), plain(5 * 24), plain_ref(5 * 24);
  WeightView off = w.view;
  off.amx = AmxUse::kOff;
  matmul(off, x.data(), 5, exact.data(), nullptr);
  for (bool amx : bf16_amx_modes()) {
    WeightView v = w.view;
    v.amx = testing::amx_use(amx);
    const MatmulJob jobs[2] = {{v, x.data(), 5, marked.data(), /*f32_x=*/true}, {v, x.data(), 5, plain.data()}};
    matmul_many(jobs, nullptr);
    matmul(v, x.data(), 5, plain_ref.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(marked.data(), exact.data(), exact.size() * 4)) << "amx " << amx;
    EXPECT_EQ(0, std::memcmp(plain.data(), plain_ref.data(), plain.size() * 4)) << "amx " << amx;
    // On AMX the unmarked job rounds x: not the exact bits.
    EXPECT_EQ(amx && cpu_isa() == CpuIsa::kAvx512Bf16, std::memcmp(plain.data(), exact.data(), exact.size() * 4) != 0);
  }
}

// Row i of an n = 37 batch is bit-equal to the n = 1 result for x row i alone, and 1, 2 and 3
// threads give the same bits. The shape is large enough that 2 threads really split rows.
TEST(MatmulTest, BatchInvariance) {
  constexpr int64_t kRows = 301, kCols = 1024, kN = 37;
  ThreadPool one(1), two(2), three(3);
  for (bool amx : bf16_amx_modes()) {
  const AmxUse use = testing::amx_use(amx);
  for (CpuIsa isa : available_isas()) {
    for (DType dtype : kDtypes) {
      if (amx && dtype != DType::kBF16 && dtype != DType::kF16) continue;
      RandomWeights w(dtype, kRows, kCols, 11);
      w.view.amx = use;
      const std::vector<float> x = random_x(kN, kCols, 12);
      std::vector<float> batch(kN * kRows), batch2(kN * kRows), batch3(kN * kRows);
      matmul_with_isa(isa, w.view, x.data(), kN, batch.data(), &one);
      matmul_with_isa(isa, w.view, x.data(), kN, batch2.data(), &two);
      matmul_with_isa(isa, w.view, x.data(), kN, batch3.data(), &three);
      EXPECT_EQ(0, std::memcmp(batch.data(), batch2.data(), batch.size() * 4)) << label(isa, dtype, w.view.amx);
      EXPECT_EQ(0, std::memcmp(batch.data(), batch3.data(), batch.size() * 4)) << label(isa, dtype, w.view.amx);
      std::vector<float> single(kRows), single2(kRows);
      for (int64_t i = 0; i < kN; ++i) {
        matmul_with_isa(isa, w.view, x.data() + i * kCols, 1, single.data(), nullptr);
        matmul_with_isa(isa, w.view, x.data() + i * kCols, 1, single2.data(), &two);
        ASSERT_EQ(0, std::memcmp(single.data(), batch.data() + i * kRows, kRows * 4))
            << label(isa, dtype, w.view.amx) << " row " << i;
        ASSERT_EQ(0, std::memcmp(single.data(), single2.data(), kRows * 4)) << label(isa, dtype, w.view.amx);
      }
      // Every sub-batch size 1..9 starting at each offset gives the same rows.
      for (int64_t m = 1; m <= 9; ++m) {
        std::vector<float> sub(m * kRows);
        matmul_with_isa(isa, w.view, x.data() + 5 * kCols, m, sub.data(), &two);
        ASSERT_EQ(0, std::memcmp(sub.data(), batch.data() + 5 * kRows, sub.size() * 4))
            << label(isa, dtype, w.view.amx) << " m=" << m;
      }
    }
  }
  }
}

}  // namespace
}  // namespace densa
