// AVX-512 FP8 / INT4 matmul (kernels/matmul/quant_*.cpp): the in-register e4m3 decoder
// against the codec table for all 256 codes; matmul against its twins (ref::matmul_fp8_x_bf16,
// ref::matmul_int4_x_q8: the same rounded activations, double accumulation) within fp32
// rounding (|y - twin| <= 1e-5 * sum_k |w x|), and against the exact ref::matmul within the
// stated activation-rounding bound (FP8: 2^-8 * sum|w x|; INT4: sum_k |w_k| * amax(x block) /
// 254); bit-identical results across n (1 vs 37) and thread counts (1 vs 2); odd row counts,
// partial FP8 blocks, partial INT4 chunks and NaN codes; INT4 bf16 scales of every sign and
// outside fp16's range; INT4 f16 scales (GGUF Q4_0 repacked) against the same checks and the
// bf16 path; INT4 codes and scales ending at an unmapped page (no read past them); INT4 g32 in
// 8-row tiles against the row-major kernel, bit for bit; the AVX2 kernels of the 16-row tile
// layouts against the same twin, bit for bit, and their activation rounding against
// activation_q8_quantize's. FP8 runs both of its paths where the
// CPU has them: vdpbf16ps, and AMX tiles (block scale folded into bf16 weights; twin
// ref::matmul_fp8_scaled_x_bf16, bound (2^-8 + 2^-18) * sum|w x|), each invariant on its own.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/internal/int8t_x.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/internal/matmul_quant_avx2.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/matmul.h"
#include "kernels/reference/matmul_quant_ref.h"
#include "kernels/reference/matmul_ref.h"
#include "quant/activation_q8.h"
#include "quant/dequantize.h"
#include "quant/fp8.h"
#include "quant/fp8_block.h"
#include "quant/int4_group.h"
#include "quant/int8_group.h"
#include "quant/affine_tiles.h"
#include "quant/ggml_blocks.h"
#include "test_util.h"
#include "affine_matrices.h"

namespace densa {
namespace {

bool have_avx512() { return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16); }
// The FP8 kernel also needs AVX512-VBMI (its table lookup).
bool have_fp8_kernel() {
  const float scale = 1.0f;
  const uint8_t code = 0;
  return matmul_internal::matmul_quant_avx512_supports(fp8_block_view(&code, &scale, 1, 1));
}

// The FP8 paths this CPU runs (testing::amx_modes): vdpbf16ps (false) and, with AMX-BF16
// on the CPU, AMX tiles (true), chosen per matrix by WeightView::amx = testing::amx_use(mode).
std::vector<bool> fp8_amx_modes() { return testing::amx_modes(); }

// `w` with WeightView::amx = use.
WeightView with_amx(WeightView w, AmxUse use) {
  w.amx = use;
  return w;
}

// Four pages, the second and fourth unmapped: codes end at end_of(0) and scales at end_of(1),
// so a kernel that reads one byte past either faults.
struct GuardedPages {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  uint8_t* base = nullptr;
  GuardedPages() {
    void* mem = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return;
    base = static_cast<uint8_t*>(mem);
    if (mprotect(base + page, page, PROT_NONE) != 0 || mprotect(base + 3 * page, page, PROT_NONE) != 0) {
      munmap(base, 4 * page);
      base = nullptr;
    }
  }
  ~GuardedPages() {
    if (base != nullptr) munmap(base, 4 * page);
  }
  GuardedPages(const GuardedPages&) = delete;
  GuardedPages& operator=(const GuardedPages&) = delete;
  uint8_t* end_of(int k) const { return base + (2 * k + 1) * page; }  // k = 0: codes, 1: scales
};

struct QuantMatrix {
  std::vector<uint8_t> codes;
  std::vector<float> scales;           // FP8
  std::vector<uint16_t> scales_bf16;  // INT4
  WeightView view;
};

QuantMatrix random_fp8(int64_t rows, int64_t cols, uint32_t seed) {
  QuantMatrix m;
  std::mt19937 rng(seed);
  m.codes.resize(static_cast<size_t>(rows * cols));
  for (auto& b : m.codes) {
    do b = static_cast<uint8_t>(rng()); while ((b & 0x7f) == 0x7f);
  }
  m.scales.resize(static_cast<size_t>(fp8_block_scale_rows(rows) * fp8_block_scale_cols(cols)));
  std::uniform_real_distribution<float> u(-12.0f, 2.0f);
  for (auto& s : m.scales) s = std::exp2(u(rng));
  m.view = fp8_block_view(m.codes.data(), m.scales.data(), rows, cols);
  return m;
}

QuantMatrix random_int4(int64_t rows, int64_t cols, int64_t group, uint32_t seed) {
  QuantMatrix m;
  std::mt19937 rng(seed);
  m.codes.resize(static_cast<size_t>(rows * cols / 2));
  for (auto& b : m.codes) b = static_cast<uint8_t>(rng());  // every nibble, -8 included
  m.scales_bf16.resize(static_cast<size_t>(rows * (cols / group)));
  std::uniform_real_distribution<float> u(-10.0f, 0.0f);
  for (auto& s : m.scales_bf16) s = f32_to_bf16(std::exp2(u(rng)));
  m.view = int4_group_view(m.codes.data(), m.scales_bf16.data(), rows, cols, group);
  return m;
}

// INT4 with f16 scales (GGUF Q4_0 repacked), random codes and finite f16 scales 2^-10 .. 1 with
// all 10 mantissa bits random.
QuantMatrix random_int4_f16(int64_t rows, int64_t cols, int64_t group, uint32_t seed) {
  QuantMatrix m = random_int4(rows, cols, group, seed);
  std::mt19937 rng(seed + 1);
  for (auto& s : m.scales_bf16) s = static_cast<uint16_t>(0x1400 + rng() % 0x2800) | (rng() % 2 ? 0x8000 : 0);
  m.view.scales_f16 = m.scales_bf16.data();  // the same storage, read as f16
  m.view.scales_bf16 = nullptr;
  return m;
}

// INT8 g32 with f16 scales (GGUF Q8_0 repacked): every code, -128 included, and finite f16
// scales 2^-10 .. 1 of either sign.
QuantMatrix random_int8(int64_t rows, int64_t cols, uint32_t seed) {
  QuantMatrix m;
  std::mt19937 rng(seed);
  m.codes.resize(static_cast<size_t>(rows * cols));
  for (auto& b : m.codes) b = static_cast<uint8_t>(rng());
  m.scales_bf16.resize(static_cast<size_t>(rows * (cols / 32)));  // holds f16 bits here
  for (auto& s : m.scales_bf16) s = static_cast<uint16_t>(0x1400 + rng() % 0x2800) | (rng() % 2 ? 0x8000 : 0);
  m.view = int8_group_view_f16(m.codes.data(), m.scales_bf16.data(), rows, cols);
  return m;
}

std::vector<float> random_x(int64_t n, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = normal(rng);
  return x;
}

// A BF16 matrix of N(0, 1) values.
struct Bf16Matrix {
  std::vector<uint16_t> bits;
  WeightView view;
};
Bf16Matrix random_bf16(int64_t rows, int64_t cols, uint32_t seed) {
  Bf16Matrix m;
  m.bits.resize(static_cast<size_t>(rows * cols));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& h : m.bits) h = f32_to_bf16(normal(rng));
  m.view.dtype = DType::kBF16;
  m.view.rows = rows;
  m.view.cols = cols;
  m.view.data = m.bits.data();
  return m;
}

// Checks accuracy against the twin and the exact reference, and invariance over n and threads
// on the AVX-512 path.
void check_matrix(const WeightView& w, int64_t n = 37) {
  ASSERT_TRUE(matmul_internal::matmul_quant_avx512_supports(w));
  const bool fp8 = w.dtype == DType::kFP8E4M3;
  const bool amx = fp8 && matmul_internal::matmul_quant_fp8_amx(w.amx);
  const std::vector<float> x = random_x(n, w.cols, 3);
  std::vector<float> y(static_cast<size_t>(n * w.rows)), ytwin(y.size()), yexact(y.size());
  matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, w, x.data(), n, y.data(), nullptr);
  if (amx) {
    ref::matmul_fp8_scaled_x_bf16(w, x.data(), n, ytwin.data());
  } else if (fp8) {
    ref::matmul_fp8_x_bf16(w, x.data(), n, ytwin.data());
  } else if (w.dtype == DType::kI8) {
    ref::matmul_int8_x_q8(w, x.data(), n, ytwin.data());
  } else {
    ref::matmul_int4_x_q8(w, x.data(), n, ytwin.data());
  }
  ref::matmul(w, x.data(), n, yexact.data());
  std::vector<float> wrow(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, wrow.data());
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x.data() + i * w.cols;
      double mag = 0, bound = 0;
      for (int64_t k = 0; k < w.cols; ++k) {
        mag += std::fabs(static_cast<double>(wrow[k]) * xi[k]);
        if (!fp8) {
          const int64_t b0 = k / kActQ8Block * kActQ8Block;
          float amax = 0;
          for (int64_t j = b0; j < std::min(w.cols, b0 + kActQ8Block); ++j) amax = std::max(amax, std::fabs(xi[j]));
          bound += std::fabs(static_cast<double>(wrow[k])) * amax / 254.0;
        }
      }
      if (fp8) bound = mag * (amx ? 0x1p-8 + 0x1p-18 : 0x1p-8);  // bf16 unit roundoff (AMX: two roundings)
      const size_t at = static_cast<size_t>(i * w.rows + r);
      ASSERT_LE(std::fabs(y[at] - ytwin[at]), 1e-5 * mag + 1e-30) << "twin " << i << "," << r;
      ASSERT_LE(std::fabs(y[at] - yexact[at]), bound * (1 + 1e-6) + 1e-5 * mag + 1e-30) << "exact " << i << "," << r;
    }
  }
  ThreadPool pool(2);
  std::vector<float> yp(y.size());
  matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, w, x.data(), n, yp.data(), &pool);
  EXPECT_EQ(0, std::memcmp(y.data(), yp.data(), y.size() * 4)) << "threads";
  std::vector<float> y1(static_cast<size_t>(w.rows));
  for (int64_t i = 0; i < n; ++i) {
    matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, w, x.data() + i * w.cols, 1, y1.data(),
                                     i % 2 ? &pool : nullptr);
    ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + i * w.rows, y1.size() * 4)) << "row " << i;
  }
}

TEST(MatmulQuantAvx512, Fp8DecoderMatchesTableForAllCodes) {
  if (!have_fp8_kernel()) GTEST_SKIP() << "no AVX-512 with VBMI";
  uint8_t codes[256];
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  float out[256];
  for (int b = 0; b < 16; ++b) matmul_internal::fp8_e4m3_decode16_avx512(codes + 16 * b, out + 16 * b);
  const float* table = fp8_e4m3_decode_table();
  for (int c = 0; c < 256; ++c) {
    if (std::isnan(table[c])) {
      EXPECT_TRUE(std::isnan(out[c])) << c;
    } else {
      uint32_t a, b;
      std::memcpy(&a, &out[c], 4);
      std::memcpy(&b, &table[c], 4);
      EXPECT_EQ(a, b) << "code " << c << ": " << out[c] << " vs " << table[c];
    }
  }
}

TEST(MatmulQuantAvx512, Fp8MatchesReferenceAndIsInvariant) {
  if (!have_fp8_kernel()) GTEST_SKIP() << "no AVX-512 with VBMI";
  for (bool amx : fp8_amx_modes()) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{160, 384}, {37, 256}, {131, 300}, {9, 130}, {5, 17}, {48, 64}}) {
      SCOPED_TRACE(std::string(amx ? "amx " : "vdpbf16ps ") + std::to_string(rows) + "x" + std::to_string(cols));
      QuantMatrix m = random_fp8(rows, cols, static_cast<uint32_t>(rows * 7 + cols));
      m.view.amx = testing::amx_use(amx);
      check_matrix(m.view);
      check_matrix(m.view, 2);  // one token tile, 14 tokens of padding (AMX)
    }
  }
}

// AMX tiles only: several x blocks (300 tokens at 4,096 columns: 128 tokens per block) and
// every row range the thread split can make (whole 8-row tiles, not 16- or 32-row ones), bit for
// bit against n = 1; scales of every kind (0, negative, tiny, large, 64-row scale blocks)
// against the twin; and the two paths differ (the AMX path really ran).
TEST(MatmulQuantAvx512, Fp8AmxTilesBlocksAndScales) {
  if (!have_fp8_kernel() || !cpu_has_amx_bf16()) GTEST_SKIP() << "no AMX-BF16 (CPU or OS)";
  check_matrix(with_amx(random_fp8(40, 4096, 61).view, AmxUse::kOn), 300);
  {
    QuantMatrix m = random_fp8(75, 512, 62);
    m.view.amx = AmxUse::kOn;
    const float special[] = {0.0f, -1.5f, 1e-30f, 3e30f, -0x1p-100f, 0x1.234568p-3f};
    for (size_t i = 0; i < m.scales.size(); ++i) m.scales[i] = special[i % std::size(special)];
    {
      SCOPED_TRACE("special scales");
      check_matrix(m.view);
    }
    SCOPED_TRACE("64-row scale blocks");
    m.scales.resize(static_cast<size_t>(((75 + 63) / 64) * 4));
    m.view.scales_f32 = m.scales.data();
    m.view.scale_rows = 64;  // scale blocks of 64 rows: a 32-row pair may straddle two
    for (size_t i = 0; i < m.scales.size(); ++i) m.scales[i] = std::exp2(static_cast<float>(i % 7) - 3.0f);
    check_matrix(m.view);
  }
  QuantMatrix m = random_fp8(64, 1024, 63);
  m.view.amx = AmxUse::kOn;
  const std::vector<float> x = random_x(5, 1024, 64);
  std::vector<float> y_amx(5 * 64), y_dp(5 * 64);
  matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, m.view, x.data(), 5, y_amx.data(), nullptr);
  matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, with_amx(m.view, AmxUse::kOff), x.data(), 5, y_dp.data(),
                                   nullptr);
  EXPECT_NE(0, std::memcmp(y_amx.data(), y_dp.data(), y_amx.size() * 4)) << "AMX and vdpbf16ps gave the same bits";
  // Row ranges from every 8-row start: the same bits as the whole matrix.
  std::vector<float> part(5 * 64);
  for (int64_t r0 = 0; r0 < 64; r0 += 8) {
    for (int64_t r1 = r0 + 8; r1 <= 64; r1 += 24) {
      std::fill(part.begin(), part.end(), -7.0f);
      const int64_t bytes = matmul_internal::matmul_quant_avx512_x_bytes(m.view, 5);
      std::vector<uint8_t> xp_storage;
      uint8_t* xp = testing::aligned_bytes(xp_storage, bytes).data();
      WorkerScratch ws;
      matmul_internal::matmul_quant_avx512_prepare(m.view, x.data(), 5, xp, ws);
      matmul_internal::matmul_quant_avx512_rows(m.view, xp, 5, part.data(), r0, r1, ws);
      for (int64_t i = 0; i < 5; ++i) {
        for (int64_t r = 0; r < 64; ++r) {
          const float want = r >= r0 && r < r1 ? y_amx[i * 64 + r] : -7.0f;
          ASSERT_EQ(std::memcmp(&want, &part[i * 64 + r], 4), 0) << "rows " << r0 << ".." << r1 << " at " << i << "," << r;
        }
      }
    }
  }
}

TEST(MatmulQuantAvx512, Int4MatchesReferenceAndIsInvariant) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  for (int64_t group : {32, 64, 128, 256}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{160, 512}, {37, 256}, {13, 384}, {11, 224}}) {
      if (cols % group != 0) continue;
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " g" + std::to_string(group));
      QuantMatrix m = random_int4(rows, cols, group, static_cast<uint32_t>(rows + cols + group));
      check_matrix(m.view);
    }
  }
}

// bf16 scales the kernel must widen exactly: negative, +-0, all 7 mantissa bits, and
// magnitudes outside fp16's range (2^-40, 3e5, 2^100). One magnitude per row (so an error in
// any group shows against the row's sum), a sign and mantissa per group that cycles over the
// rows (every lane of the in-register scale permute sees every value); against the twin, the
// exact reference and the fallback.
TEST(MatmulQuantAvx512, Int4Bf16ScalesOfEverySignAndRange) {
  const float magnitude[] = {1.0f, 0x1p-40f, 3.0e5f, 0x1p100f};
  const float mantissa[] = {1.0f, -1.5f, 0.75f, -1.25f, 0.0f, -0.0f, 1.9921875f, -1.0078125f, 1.0f / 3.0f};
  for (int64_t group : {32, 64, 128}) {
    for (int64_t cols : {int64_t{512}, int64_t{224}}) {
      if (cols % group != 0) continue;
      SCOPED_TRACE("cols " + std::to_string(cols) + " g" + std::to_string(group));
      const int64_t rows = 23, groups = cols / group;
      QuantMatrix m = random_int4(rows, cols, group, static_cast<uint32_t>(cols + group));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          m.scales_bf16[static_cast<size_t>(r * groups + g)] = f32_to_bf16(magnitude[r % 4] * mantissa[(r + g) % 9]);
        }
      }
      if (have_avx512()) check_matrix(m.view);
      const int64_t n = 3;
      const std::vector<float> x = random_x(n, cols, 8);
      std::vector<float> a(static_cast<size_t>(n * rows)), b(a.size()), wrow(static_cast<size_t>(cols));
      matmul_internal::matmul_with_isa(CpuIsa::kScalar, m.view, x.data(), n, a.data(), nullptr);
      ref::matmul(m.view, x.data(), n, b.data());
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(m.view, r, wrow.data());
        for (int64_t i = 0; i < n; ++i) {
          double mag = 0;
          for (int64_t k = 0; k < cols; ++k) mag += std::fabs(static_cast<double>(wrow[k]) * x[i * cols + k]);
          const size_t at = static_cast<size_t>(i * rows + r);
          ASSERT_LE(std::fabs(a[at] - b[at]), 1e-5 * mag) << "fallback " << i << "," << r;
        }
      }
    }
  }
}

// f16 scales (repacked Q4_0): the same checks as bf16, at g32 (Q4_0's) and past the chunk
// (g128, g256: one broadcast scale per chunk); special f16 scales (subnormal, the largest,
// +-0, not exact in bf16) in every lane position; and, where a scale is exact in both formats,
// bit-identical output to the bf16 path (so the f16 lane mapping is the bf16 one).
TEST(MatmulQuantAvx512, Int4F16ScalesMatchReferenceAndBf16Path) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  const auto& special = testing::kSpecialF16Scales;
  const size_t num_special = std::size(special);
  for (int64_t group : {32, 128, 256}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{160, 512}, {37, 256}, {13, 384}, {11, 224}}) {
      if (cols % group != 0) continue;
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " g" + std::to_string(group));
      QuantMatrix m = random_int4_f16(rows, cols, group, static_cast<uint32_t>(3 * rows + cols + group));
      for (size_t i = 0; i < m.scales_bf16.size(); i += 5) m.scales_bf16[i] = special[i / 5 % num_special];
      check_matrix(m.view);
      // Powers of two are exact in both: the f16 view and a bf16 view of the same values agree bit for bit.
      QuantMatrix b = m;
      std::mt19937 rng(static_cast<uint32_t>(cols));
      std::vector<uint16_t> as_bf16(m.scales_bf16.size());
      for (size_t i = 0; i < as_bf16.size(); ++i) {
        const int e = static_cast<int>(rng() % 20) - 14;
        b.scales_bf16[i] = static_cast<uint16_t>((e + 15) << 10) | (rng() % 2 ? 0x8000 : 0);
        as_bf16[i] = f32_to_bf16(f16_to_f32(b.scales_bf16[i]));
      }
      b.view = m.view;
      b.view.data = b.codes.data();
      b.view.scales_f16 = b.scales_bf16.data();
      const WeightView bf = int4_group_view(b.codes.data(), as_bf16.data(), rows, cols, group);
      for (int64_t n : {1, 5}) {
        const std::vector<float> x = random_x(n, cols, 4);
        std::vector<float> y16(static_cast<size_t>(n * rows)), ybf(y16.size());
        matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, b.view, x.data(), n, y16.data(), nullptr);
        matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, bf, x.data(), n, ybf.data(), nullptr);
        EXPECT_EQ(0, std::memcmp(y16.data(), ybf.data(), y16.size() * 4)) << "n " << n;
      }
    }
  }
}

// INT4 g32 in 8-row tiles (WeightLayout::kInt4Tiles8): the tiled kernel passes check_matrix
// (twin, exact bound, invariance over n and threads) and gives the row-major kernel's bits for
// GEMV (n = 1) and GEMM (n = 2..7, x tails of 1 and 2), with bf16 and f16 scales, one tile and
// several; the exact fallback reads the tiles too and gives its row-major bits.
TEST(MatmulQuantAvx512, Int4TilesMatchRowMajorBitForBit) {
  if (!matmul_internal::matmul_quant_avx512_int4_tiles_supported()) GTEST_SKIP() << "no AVX-512 with VBMI and GFNI";
  for (bool f16 : {false, true}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{64, 384}, {8, 128}, {40, 1024}}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + (f16 ? " f16" : " bf16"));
      const uint32_t seed = static_cast<uint32_t>(rows + cols + f16);
      const QuantMatrix m = f16 ? random_int4_f16(rows, cols, 32, seed) : random_int4(rows, cols, 32, seed);
      ASSERT_TRUE(int4_group_tileable(m.view));
      const int64_t bytes = int4_group_tile8_bytes(m.view);
      std::vector<uint8_t> storage;
      const WeightView t = int4_group_tile8(m.view, testing::aligned_bytes(storage, bytes));
      check_matrix(t);
      ThreadPool pool(2);
      for (int64_t n : {1, 2, 3, 4, 5, 7}) {
        const std::vector<float> x = random_x(n, cols, static_cast<uint32_t>(n));
        std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size());
        matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, m.view, x.data(), n, want.data(), nullptr);
        matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, t, x.data(), n, got.data(), &pool);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << "n " << n;
        matmul_internal::matmul_with_isa(CpuIsa::kScalar, m.view, x.data(), n, want.data(), nullptr);
        matmul_internal::matmul_with_isa(CpuIsa::kScalar, t, x.data(), n, got.data(), nullptr);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << "fallback, n " << n;
      }
    }
  }
}

// A matrix in 16-row tiles (INT8 or INT4, `t`, from the row-major `rows_view`): every row holds
// the row-major values; check_matrix passes (accuracy against the double twin and the exact
// product, invariance); the VNNI and, where the CPU has it, the AMX-INT8 kernels equal
// ref::matmul_int8_groups_fp32 bit for bit for n from 1 to 50 (AMX: whole blocks and padded
// tails of 8 or more rows), on one thread and on a pool; the fallback (CPUs below AVX-512) reads
// the tiles through the dequantizer and gives the row-major matrix's exact product.
void expect_tiles16_equal_twin(const WeightView& rows_view, const WeightView& t) {
  std::vector<float> a(static_cast<size_t>(t.cols)), b(a.size());
  for (int64_t r = 0; r < t.rows; ++r) {
    dequantize_row(rows_view, r, a.data());
    dequantize_row(t, r, b.data());
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "row " << r;
  }
  check_matrix(t, 37);
  std::vector<bool> amx_modes = {false};
  if (cpu_use_amx() && cpu_has_amx_int8()) amx_modes.push_back(true);
  ThreadPool pool(3);
  for (bool amx : amx_modes) {
    const WeightView t_amx = with_amx(t, testing::amx_use(amx));
    for (int64_t n : {1, 2, 4, 5, 8, 13, 16, 17, 29, 35, 47, 48, 50}) {
      const std::vector<float> x = random_x(n, t.cols, static_cast<uint32_t>(n));
      std::vector<float> y(static_cast<size_t>(n * t.rows)), yp(y.size()), twin(y.size());
      ref::matmul_int8_groups_fp32(t, x.data(), n, twin.data());
      matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, t_amx, x.data(), n, y.data(), nullptr);
      matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, t_amx, x.data(), n, yp.data(), &pool);
      EXPECT_EQ(0, std::memcmp(y.data(), twin.data(), y.size() * 4)) << "amx " << amx << " n " << n;
      EXPECT_EQ(0, std::memcmp(yp.data(), twin.data(), y.size() * 4)) << "threads, amx " << amx << " n " << n;
    }
  }
  const std::vector<float> x = random_x(3, t.cols, 5);
  std::vector<float> want(static_cast<size_t>(3 * t.rows)), got(want.size());
  matmul_internal::matmul_with_isa(CpuIsa::kScalar, rows_view, x.data(), 3, want.data(), nullptr);
  matmul_internal::matmul_with_isa(CpuIsa::kScalar, t, x.data(), 3, got.data(), nullptr);
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << "fallback";
}

// INT4 g32 in 16-row tiles (WeightLayout::kInt4Tiles16): the layout holds the same values and
// scales, and the kernels (VNNI for every n, AMX-INT8 for blocks of 16 x rows where the CPU has
// it) equal the INT8 tiles' scalar fp32 twin bit for bit, with bf16 and f16 scales, extreme
// nibbles, one tile and several, one chunk of groups and several (more than 1,024 columns), so
// n, threads and the AMX / VNNI split change no result. The exact fallback reads the tiles too.
TEST(MatmulQuantAvx512, Int4Tiles16EqualTheirTwinBitForBit) {
  if (!matmul_internal::matmul_quant_avx512_int8_tiles_supported()) GTEST_SKIP() << "no AVX-512 VNNI";
  for (bool f16 : {false, true}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 128}, {48, 384}, {32, 1152}, {16, 2176}}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + (f16 ? " f16" : " bf16"));
      const uint32_t seed = static_cast<uint32_t>(rows + cols + f16);
      QuantMatrix m = f16 ? random_int4_f16(rows, cols, 32, seed) : random_int4(rows, cols, 32, seed);
      for (int64_t k = 0; k < cols / 2; ++k) {
        m.codes[static_cast<size_t>(k)] = 0x00;                 // row 0: all -8
        m.codes[static_cast<size_t>(cols / 2 + k)] = 0xff;      // row 1: all 7
      }
      ASSERT_TRUE(int4_group_tileable16(m.view));
      std::vector<uint8_t> storage;
      const WeightView t = int4_group_tile16(m.view, testing::aligned_bytes(storage, int4_group_tile8_bytes(m.view)));
      ASSERT_EQ(t.layout, WeightLayout::kInt4Tiles16);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < cols / 32; ++g) ASSERT_EQ(int4_group_scale(m.view, r, g), int4_group_scale(t, r, g));
      }
      expect_tiles16_equal_twin(m.view, t);
    }
  }
}

bool have_avx2() { return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx2); }

// The AVX2 kernels of a 16-row tile matrix equal ref::matmul_int8_groups_fp32 bit for bit for n
// from 1 to 100 (4-row blocks and their 1-row rest, several x blocks at 100), on one thread and
// on a pool, and so equal the AVX-512 kernels, which are run on the same x where the CPU has
// them. matmul() at this process's level runs them where AVX2 is the level.
void expect_avx2_equal_twin(const WeightView& t) {
  ASSERT_TRUE(matmul_internal::matmul_quant_avx2_supports(t));
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 29, 48, 50, 100}) {
    const std::vector<float> x = random_x(n, t.cols, static_cast<uint32_t>(n + 7));
    std::vector<float> y(static_cast<size_t>(n * t.rows)), yp(y.size()), twin(y.size());
    ref::matmul_int8_groups_fp32(t, x.data(), n, twin.data());
    matmul_internal::matmul_with_isa(CpuIsa::kAvx2, t, x.data(), n, y.data(), nullptr);
    matmul_internal::matmul_with_isa(CpuIsa::kAvx2, t, x.data(), n, yp.data(), &pool);
    EXPECT_EQ(0, std::memcmp(y.data(), twin.data(), y.size() * 4)) << "n " << n;
    EXPECT_EQ(0, std::memcmp(yp.data(), twin.data(), y.size() * 4)) << "threads, n " << n;
    if (t.layout != WeightLayout::kRows && matmul_internal::matmul_quant_avx512_supports(t)) {
      matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, t, x.data(), n, yp.data(), &pool);
      EXPECT_EQ(0, std::memcmp(yp.data(), twin.data(), y.size() * 4)) << "avx-512, n " << n;
    }
    if (cpu_isa() == CpuIsa::kAvx2) {
      matmul(t, x.data(), n, yp.data(), &pool);
      EXPECT_EQ(0, std::memcmp(yp.data(), twin.data(), y.size() * 4)) << "matmul(), n " << n;
    }
  }
}

TEST(MatmulQuantAvx2, Int8TilesEqualTheirTwinBitForBit) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  const auto& special = testing::kSpecialF16Scales;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 128}, {48, 256}, {32, 1152}, {16, 8192}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    QuantMatrix m = random_int8(rows, cols, static_cast<uint32_t>(rows + cols + 1));
    for (size_t i = 0; i < m.scales_bf16.size(); i += 3) m.scales_bf16[i] = special[i / 3 % std::size(special)];
    for (int64_t k = 0; k < cols; ++k) {
      m.codes[static_cast<size_t>(k)] = 0x80;         // row 0: all -128 (|c| = 128 as vpmaddubsw's unsigned side)
      m.codes[static_cast<size_t>(cols + k)] = 0x7f;  // row 1: all 127
    }
    std::vector<uint8_t> storage;
    const WeightView t = int8_group_tile16(m.view, testing::aligned_bytes(storage, int8_group_tile16_bytes(m.view)));
    expect_avx2_equal_twin(t);
  }
}

TEST(MatmulQuantAvx2, Int4Tiles16EqualTheirTwinBitForBit) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  for (bool f16 : {false, true}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 128}, {48, 384}, {32, 2176}, {16, 8192}}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + (f16 ? " f16" : " bf16"));
      const uint32_t seed = static_cast<uint32_t>(rows + cols + f16 + 2);
      QuantMatrix m = f16 ? random_int4_f16(rows, cols, 32, seed) : random_int4(rows, cols, 32, seed);
      for (int64_t k = 0; k < cols / 2; ++k) {
        m.codes[static_cast<size_t>(k)] = 0x00;             // row 0: all -8
        m.codes[static_cast<size_t>(cols / 2 + k)] = 0xff;  // row 1: all 7 (the int16 sums' largest terms)
      }
      std::vector<uint8_t> storage;
      const WeightView t = int4_group_tile16(m.view, testing::aligned_bytes(storage, int4_group_tile8_bytes(m.view)));
      expect_avx2_equal_twin(t);
    }
  }
}

// Row-major INT8 / INT4 g32 on AVX2 (the matrices the tiles do not take: rows not a multiple of
// 16, columns not of 128, as a tensor-parallel slice can be): the tiles' arithmetic, so the twin
// bit for bit, and a tileable matrix gives the same bits in either layout.
TEST(MatmulQuantAvx2, RowMajorEqualsTheTwinAndTheTiles) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{13, 96}, {37, 160}, {8, 32}, {32, 256}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const uint32_t seed = static_cast<uint32_t>(rows * cols);
    const QuantMatrix i8 = random_int8(rows, cols, seed);
    const QuantMatrix i4 = random_int4(rows, cols, 32, seed + 1);
    const QuantMatrix i4h = random_int4_f16(rows, cols, 32, seed + 2);
    for (const WeightView& w : {i8.view, i4.view, i4h.view}) {
      SCOPED_TRACE(dtype_name(w.dtype));
      expect_avx2_equal_twin(w);
      if (rows % 16 != 0 || cols % 128 != 0) continue;
      std::vector<uint8_t> storage;
      const WeightView t =
          w.dtype == DType::kI8
              ? int8_group_tile16(w, testing::aligned_bytes(storage, int8_group_tile16_bytes(w)))
              : int4_group_tile16(w, testing::aligned_bytes(storage, int4_group_tile8_bytes(w)));
      const std::vector<float> x = random_x(5, cols, 3);
      std::vector<float> a(static_cast<size_t>(5 * rows)), b(a.size());
      matmul_internal::matmul_with_isa(CpuIsa::kAvx2, w, x.data(), 5, a.data(), nullptr);
      matmul_internal::matmul_with_isa(CpuIsa::kAvx2, t, x.data(), 5, b.data(), nullptr);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "rows against tiles";
    }
  }
}

// The int16 partial sums of the INT4 kernel at their bound: every code 15 or 0 against x whose
// q are all +-127 (each group's eight steps add 2 * 15 * 127 per int16 lane, 30,480 in all).
TEST(MatmulQuantAvx2, Int4SumsAtTheirBoundDoNotSaturate) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  const int64_t rows = 16, cols = 256;
  QuantMatrix m = random_int4_f16(rows, cols, 32, 9);
  for (size_t i = 0; i < m.codes.size(); ++i) m.codes[i] = (i / (cols / 2)) % 2 ? 0xff : 0x00;
  std::vector<uint8_t> storage;
  const WeightView t = int4_group_tile16(m.view, testing::aligned_bytes(storage, int4_group_tile8_bytes(m.view)));
  for (float sign : {1.0f, -1.0f}) {
    const std::vector<float> x(static_cast<size_t>(2 * cols), sign * 3.0f);  // q = +-127 everywhere
    std::vector<float> y(static_cast<size_t>(2 * rows)), twin(y.size());
    ref::matmul_int8_groups_fp32(t, x.data(), 2, twin.data());
    matmul_internal::matmul_with_isa(CpuIsa::kAvx2, t, x.data(), 2, y.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(y.data(), twin.data(), y.size() * 4)) << "sign " << sign;
  }
}

// One x row of 12 groups of 32 whose groups are each a case of the activation rounding: normal
// values, ties at half (x * 127 / amax = k + 0.5), all-zero groups, groups with NaN or an
// infinity, subnormal values, the largest floats, and groups too small for 127 / amax.
std::vector<float> rounding_cases_x() {
  const int64_t cols = 12 * 32;
  std::vector<float> x = random_x(1, cols, 77);
  for (int j = 0; j < 32; ++j) x[32 + j] = static_cast<float>(j - 16) + 0.5f;  // amax 16.5: not ties
  for (int j = 0; j < 32; ++j) x[64 + j] = j == 0 ? 127.0f : static_cast<float>(j % 9) - 4.5f;  // inv 1: ties
  for (int j = 0; j < 32; ++j) x[96 + j] = 0.0f;
  x[128 + 5] = std::numeric_limits<float>::quiet_NaN();
  x[160 + 31] = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < 32; ++j) x[192 + j] = static_cast<float>(j) * 1e-44f;  // subnormal
  for (int j = 0; j < 32; ++j) x[224 + j] = (j % 2 ? -1.0f : 1.0f) * std::numeric_limits<float>::max() / static_cast<float>(j + 1);
  for (int j = 0; j < 32; ++j) x[256 + j] = static_cast<float>(j) * 1e-38f;  // 127 / amax overflows
  for (int j = 0; j < 32; ++j) x[288 + j] = j == 3 ? -2.0f : 0.0f;
  return x;
}

// The AVX2 activation rounding gives activation_q8_quantize's q and scales bit for bit on every
// case of rounding_cases_x.
TEST(MatmulQuantAvx2, ActivationQuantizeMatchesReferenceBitForBit) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  const int64_t groups = 12, cols = groups * 32;
  const std::vector<float> x = rounding_cases_x();
  std::vector<int8_t> q(static_cast<size_t>(cols)), q_ref(q.size());
  std::vector<float> s(static_cast<size_t>(groups)), s_ref(s.size());
  activation_q8_quantize(x.data(), cols, q_ref.data(), s_ref.data());
  matmul_internal::activation_q8_quantize_avx2(x.data(), cols, q.data(), s.data());
  EXPECT_EQ(q, q_ref);
  for (int64_t g = 0; g < groups; ++g) {
    EXPECT_EQ(std::isnan(s[g]), std::isnan(s_ref[g])) << "group " << g;
    if (!std::isnan(s_ref[g])) {
      EXPECT_EQ(s[g], s_ref[g]) << "group " << g;
    }
  }
  EXPECT_TRUE(std::isnan(s[4]) && std::isnan(s[5]));
  EXPECT_EQ(s[3], 0.0f);
  EXPECT_EQ(s[8], 0.0f);  // too small: zero, like an all-zero group
  EXPECT_EQ(q[288 + 3], -127);
}

// The AVX-512 preparation of the 16-row tile layouts (prepare_x_int8t) holds, for every row,
// activation_q8_quantize's q and scales bit for bit and 128 x each group's sum of q, on every
// case of rounding_cases_x; the padding rows of the last block are zero.
TEST(MatmulQuantAvx512, PreparedTileActivationsMatchTheReference) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  const int64_t groups = 12, cols = groups * 32, n = 3;
  QuantMatrix m = random_int8(16, cols, 78);
  std::vector<uint8_t> storage;
  const WeightView w = int8_group_tile16(m.view, testing::aligned_bytes(storage, int8_group_tile16_bytes(m.view)));
  ASSERT_EQ(w.layout, WeightLayout::kInt8Tiles16);
  std::vector<float> x = random_x(n, cols, 79);
  const std::vector<float> cases = rounding_cases_x();
  std::copy(cases.begin(), cases.end(), x.begin() + cols);  // row 1
  std::vector<uint8_t> xp_storage;
  const std::span<uint8_t> prepared =
      testing::aligned_bytes(xp_storage, static_cast<size_t>(matmul_internal::matmul_quant_avx512_x_bytes(w, n)));
  std::fill(prepared.begin(), prepared.end(), uint8_t{0xa5});  // the padding rows must be written
  uint8_t* xp = prepared.data();
  WorkerScratch ws;
  matmul_internal::matmul_quant_avx512_prepare_rows(w, x.data(), n, 0, n, xp, ws);
  const int64_t stride = matmul_internal::int8t_x_stride(cols);
  for (int64_t i = 0; i < 16; ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    std::vector<int8_t> q_ref(static_cast<size_t>(cols), 0);
    std::vector<float> s_ref(static_cast<size_t>(groups), 0.0f);
    if (i < n) activation_q8_quantize(x.data() + i * cols, cols, q_ref.data(), s_ref.data());
    const matmul_internal::Int8tXRow row = matmul_internal::int8t_x_row(xp, stride, cols, i);
    for (int64_t g = 0; g < groups; ++g) {
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) {
        const int8_t got = reinterpret_cast<const int8_t*>(row.q + 128 * g)[j];
        ASSERT_EQ(got, q_ref[static_cast<size_t>(32 * g + j)]) << "group " << g << " element " << j;
        sum += got;
      }
      const float want_s = s_ref[static_cast<size_t>(g)];
      if (std::isnan(want_s)) {
        EXPECT_TRUE(std::isnan(row.xs[g])) << "group " << g;
      } else {
        EXPECT_EQ(0, std::memcmp(&row.xs[g], &want_s, 4)) << "group " << g << ": " << row.xs[g] << " vs " << want_s;
      }
      EXPECT_EQ(row.xc[g], 128 * sum) << "group " << g;
    }
  }
}

// GEMMs take x in blocks that fit in L2 (~256 KiB of prepared x): with 8,192 columns a block
// is 12-30 rows, so 37 rows run as several blocks and a partial one. check_matrix compares them
// with the twins and, bit for bit, with one-row calls; every format and layout.
TEST(MatmulQuantAvx512, GemmInXBlocksChangesNoResult) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  const int64_t rows = 16, cols = 8192;
  if (have_fp8_kernel()) check_matrix(random_fp8(rows, cols, 41).view);
  check_matrix(random_int4(rows, cols, 32, 42).view);
  check_matrix(random_int4_f16(rows, cols, 32, 43).view);
  check_matrix(random_int8(rows, cols, 44).view);
  if (matmul_internal::matmul_quant_avx512_int4_tiles_supported()) {
    const QuantMatrix m = random_int4(rows, cols, 32, 45);
    std::vector<uint8_t> storage;
    check_matrix(int4_group_tile8(m.view, testing::aligned_bytes(storage, int4_group_tile8_bytes(m.view))));
  }
  if (matmul_runs_int4_layout(WeightLayout::kInt4Tiles16)) {
    const QuantMatrix m = random_int4_f16(rows, cols, 32, 46);
    std::vector<uint8_t> storage;
    check_matrix(int4_group_tile16(m.view, testing::aligned_bytes(storage, int4_group_tile8_bytes(m.view))));
  }
}

// INT8 (repacked Q8_0, W8A8): against the twin and the exact reference, invariant over n and
// threads; column counts whose last 128-column step holds 1, 2 or 3 groups (160, 192, 224,
// 96, 32) and none; scales of every kind (subnormal, the largest, +-0, not exact in bf16) in
// every lane group; extreme codes
// (all -128, all 127) where the 128-offset correction matters most; and codes and scales
// ending before an unmapped page (the kernel reads exactly its bytes and scales).
TEST(MatmulQuantAvx512, Int8MatchesReferenceAndIsInvariant) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  const auto& special = testing::kSpecialF16Scales;
  const size_t num_special = std::size(special);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{160, 512}, {37, 224}, {13, 384}, {11, 96}, {9, 32}, {10, 160}, {12, 192}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    QuantMatrix m = random_int8(rows, cols, static_cast<uint32_t>(rows * cols));
    check_matrix(m.view);
    for (size_t i = 0; i < m.scales_bf16.size(); i += 3) m.scales_bf16[i] = special[i / 3 % num_special];
    for (int64_t k = 0; k < cols; ++k) {
      m.codes[static_cast<size_t>(k)] = 0x80;                  // row 0: all -128
      m.codes[static_cast<size_t>(cols + k)] = 0x7f;           // row 1: all 127
    }
    check_matrix(m.view);
  }
  const GuardedPages guard;
  ASSERT_NE(guard.base, nullptr);
  for (int64_t cols : {int64_t{256}, int64_t{224}}) {
    const int64_t rows = 9;
    const QuantMatrix m = random_int8(rows, cols, static_cast<uint32_t>(cols));
    uint8_t* codes = guard.end_of(0) - m.codes.size();
    auto* scales = reinterpret_cast<uint16_t*>(guard.end_of(1)) - m.scales_bf16.size();
    std::memcpy(codes, m.codes.data(), m.codes.size());
    std::memcpy(scales, m.scales_bf16.data(), m.scales_bf16.size() * 2);
    const WeightView edge = int8_group_view_f16(codes, scales, rows, cols);
    for (int64_t n : {1, 3}) {
      const std::vector<float> x = random_x(n, cols, 9);
      std::vector<float> y(static_cast<size_t>(n * rows)), want(y.size());
      matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, edge, x.data(), n, y.data(), nullptr);
      matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, m.view, x.data(), n, want.data(), nullptr);
      EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4)) << "cols " << cols << " n " << n;
    }
  }
}

// INT8 in 16-row tiles (WeightLayout::kInt8Tiles16): the layout holds the same values, and the
// kernels (VNNI for every n, AMX-INT8 for blocks of 16 x rows where the CPU has it) equal their
// scalar fp32 twin bit for bit, so n, threads and the AMX / VNNI split change no result.
TEST(MatmulQuantAvx512, Int8TilesEqualTheirTwinBitForBit) {
  if (!matmul_internal::matmul_quant_avx512_int8_tiles_supported()) GTEST_SKIP() << "no AVX-512 VNNI";
  const auto& special = testing::kSpecialF16Scales;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 128}, {48, 256}, {160, 512}, {32, 1024}, {16, 1152}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    QuantMatrix m = random_int8(rows, cols, static_cast<uint32_t>(rows + cols));
    for (size_t i = 0; i < m.scales_bf16.size(); i += 3) m.scales_bf16[i] = special[i / 3 % std::size(special)];
    for (int64_t k = 0; k < cols; ++k) {
      m.codes[static_cast<size_t>(k)] = 0x80;         // row 0: all -128
      m.codes[static_cast<size_t>(cols + k)] = 0x7f;  // row 1: all 127
    }
    ASSERT_TRUE(int8_group_tileable(m.view));
    std::vector<uint8_t> storage;
    const WeightView t = int8_group_tile16(m.view, testing::aligned_bytes(storage, int8_group_tile16_bytes(m.view)));
    ASSERT_EQ(t.layout, WeightLayout::kInt8Tiles16);
    expect_tiles16_equal_twin(m.view, t);
  }
}

// Weight codes and scales ending right before an unmapped page, as the last tensors of a
// mapped checkpoint can: the kernel loads exactly the bytes and scales each chunk covers (a
// full-width scale load would fault here), for GEMV and GEMM, full and partial last chunks.
TEST(MatmulQuantAvx512, Int4ReadsNothingPastCodesOrScales) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  const GuardedPages guard;
  ASSERT_NE(guard.base, nullptr);
  for (int64_t group : {32, 64, 128}) {
    for (int64_t cols : {int64_t{256}, int64_t{224}}) {
      if (cols % group != 0) continue;
      SCOPED_TRACE("cols " + std::to_string(cols) + " g" + std::to_string(group));
      const int64_t rows = 9;
      const QuantMatrix m = random_int4(rows, cols, group, static_cast<uint32_t>(7 * cols + group));
      uint8_t* codes = guard.end_of(0) - m.codes.size();
      auto* scales = reinterpret_cast<uint16_t*>(guard.end_of(1)) - m.scales_bf16.size();
      std::memcpy(codes, m.codes.data(), m.codes.size());
      std::memcpy(scales, m.scales_bf16.data(), m.scales_bf16.size() * 2);
      for (bool f16 : {false, true}) {  // bf16 scales, or the same bits read as f16 (repacked Q4_0)
        WeightView edge = int4_group_view(codes, scales, rows, cols, group), whole = m.view;
        if (f16) {
          edge.scales_f16 = std::exchange(edge.scales_bf16, nullptr);
          whole.scales_f16 = std::exchange(whole.scales_bf16, nullptr);
        }
        for (int64_t n : {1, 3}) {
          const std::vector<float> x = random_x(n, cols, 9);
          std::vector<float> y(static_cast<size_t>(n * rows)), want(y.size());
          matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, edge, x.data(), n, y.data(), nullptr);
          matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, whole, x.data(), n, want.data(), nullptr);
          EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4)) << "n " << n << (f16 ? " f16" : " bf16");
        }
      }
    }
  }
}

// FP8 on both paths reads exactly its codes and scales: a matrix ending right before an
// unmapped page (partial last 64-column step, rows not a multiple of 16) gives the bits of the
// same matrix in ordinary memory, for n = 1 and n = 3.
TEST(MatmulQuantAvx512, Fp8ReadsNothingPastCodesOrScales) {
  if (!have_fp8_kernel()) GTEST_SKIP() << "no AVX-512 with VBMI";
  const GuardedPages guard;
  ASSERT_NE(guard.base, nullptr);
  for (int64_t cols : {int64_t{200}, int64_t{256}}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const int64_t rows = 15;  // 15 x 256 codes fit the page
    const QuantMatrix m = random_fp8(rows, cols, static_cast<uint32_t>(cols + 5));
    uint8_t* codes = guard.end_of(0) - m.codes.size();
    float* scales = reinterpret_cast<float*>(guard.end_of(1)) - m.scales.size();
    std::memcpy(codes, m.codes.data(), m.codes.size());
    std::memcpy(scales, m.scales.data(), m.scales.size() * 4);
    const WeightView edge = fp8_block_view(codes, scales, rows, cols);
    for (bool amx : fp8_amx_modes()) {
      const AmxUse use = testing::amx_use(amx);
      for (int64_t n : {1, 3}) {
        const std::vector<float> x = random_x(n, cols, 10);
        std::vector<float> y(static_cast<size_t>(n * rows)), want(y.size());
        matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, with_amx(edge, use), x.data(), n, y.data(), nullptr);
        matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, with_amx(m.view, use), x.data(), n, want.data(), nullptr);
        EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4)) << (amx ? "amx" : "vdpbf16ps") << " n " << n;
      }
    }
  }
}

// The fallback (every ISA below AVX-512) keeps x exact: it agrees with ref::matmul within
// fp32 rounding, for FP8 and INT4.
TEST(MatmulQuantFallback, MatchesExactReference) {
  QuantMatrix q4 = random_int4(24, 256, 32, 99);
  QuantMatrix f8 = random_fp8(19, 300, 98);
  QuantMatrix q4f16 = random_int4_f16(24, 256, 32, 97);
  QuantMatrix i8 = random_int8(24, 224, 96);
  for (const WeightView* w : {&q4.view, &f8.view, &q4f16.view, &i8.view}) {
    const std::vector<float> x = random_x(3, w->cols, 4);
    std::vector<float> a(static_cast<size_t>(3 * w->rows)), b(a.size());
    matmul_internal::matmul_with_isa(CpuIsa::kScalar, *w, x.data(), 3, a.data(), nullptr);
    ref::matmul(*w, x.data(), 3, b.data());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5f * (1.0f + std::fabs(b[k])));
  }
}

// A NaN code makes its row's outputs NaN, as the reference dequantization does.
TEST(MatmulQuantAvx512, Fp8NanCodePropagates) {
  if (!have_fp8_kernel()) GTEST_SKIP() << "no AVX-512 with VBMI";
  QuantMatrix m = random_fp8(10, 256, 5);
  m.codes[3 * 256 + 200] = 0xff;
  m.codes[7 * 256 + 1] = 0x7f;
  const std::vector<float> x = random_x(2, 256, 6);
  for (bool amx : fp8_amx_modes()) {
    const WeightView w = with_amx(m.view, testing::amx_use(amx));
    for (int64_t n : {1, 2}) {
      std::vector<float> y(static_cast<size_t>(n * 10));
      matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, w, x.data(), n, y.data(), nullptr);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < 10; ++r) {
          EXPECT_EQ(std::isnan(y[i * 10 + r]), r == 3 || r == 7) << (amx ? "amx " : "") << i << "," << r;
        }
      }
    }
  }
}

// matmul_many splits the rows of several products (mixed dtypes, sizes and batch sizes) over
// one pool call; every output must equal the one-product matmul bit for bit, whatever the
// thread count, and rows outside the products' outputs must stay untouched.
TEST(MatmulMany, EqualsOneMatmulPerJob) {
  const QuantMatrix a = random_int4(300, 2048, 32, 11);
  const QuantMatrix b = random_fp8(200, 1024, 12);
  const QuantMatrix c = random_int4(5, 256, 128, 13);  // smaller than one row tile
  const Bf16Matrix d = random_bf16(77, 512, 14);
  const WeightView views[4] = {a.view, b.view, c.view, d.view};
  const int64_t ns[4] = {1, 3, 7, 2};
  for (CpuIsa isa : {CpuIsa::kScalar, cpu_isa()}) {
    if (isa == CpuIsa::kAvx512Bf16 && !have_fp8_kernel()) continue;  // FP8 needs VBMI there
    std::vector<std::vector<float>> xs, want;
    for (int j = 0; j < 4; ++j) {
      xs.push_back(random_x(ns[j], views[j].cols, 20 + j));
      want.emplace_back(static_cast<size_t>(ns[j] * views[j].rows));
      matmul_internal::matmul_with_isa(isa, views[j], xs[j].data(), ns[j], want[j].data(), nullptr);
    }
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<std::vector<float>> got;
      std::vector<MatmulJob> jobs;
      for (int j = 0; j < 4; ++j) got.emplace_back(want[j].size() + 16, -7.0f);  // 16 guard floats
      for (int j = 0; j < 4; ++j) jobs.push_back({views[j], xs[j].data(), ns[j], got[j].data()});
      matmul_internal::matmul_many_with_isa(isa, jobs, &pool);
      for (int j = 0; j < 4; ++j) {
        ASSERT_EQ(0, std::memcmp(got[j].data(), want[j].data(), want[j].size() * 4))
            << "isa " << cpu_isa_name(isa) << " threads " << threads << " job " << j;
        for (size_t g = want[j].size(); g < got[j].size(); ++g) ASSERT_EQ(got[j][g], -7.0f) << "guard " << j;
      }
    }
  }
}

// A prefill-sized GEMM is split into parts whose sizes halve per thread, claimed dynamically:
// over 1-4 threads the parts cover every row of two products (the first not a whole number of
// 32-row parts) once, writing nothing past them, with the one-thread bits.
TEST(MatmulMany, GemmPartsCoverEveryRowOnceOnAnyThreadCount) {
  if (!matmul_internal::matmul_quant_avx512_int8_tiles_supported()) GTEST_SKIP() << "no AVX-512 VNNI";
  const QuantMatrix a = random_int8(1040, 1024, 31);  // 65 tiles of 16 rows
  const QuantMatrix b = random_int8(48, 1024, 32);
  std::vector<uint8_t> sa, sb;
  const WeightView ta = int8_group_tile16(a.view, testing::aligned_bytes(sa, int8_group_tile16_bytes(a.view)));
  const WeightView tb = int8_group_tile16(b.view, testing::aligned_bytes(sb, int8_group_tile16_bytes(b.view)));
  const int64_t n = 80;
  const std::vector<float> x = random_x(n, 1024, 33);
  std::vector<float> want_a(static_cast<size_t>(n * ta.rows)), want_b(static_cast<size_t>(n * tb.rows));
  matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, ta, x.data(), n, want_a.data(), nullptr);
  matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, tb, x.data(), n, want_b.data(), nullptr);
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 3; ++round) {
      std::vector<float> ya(want_a.size() + 16, -7.0f), yb(want_b.size() + 16, -7.0f);  // 16 guard floats
      const MatmulJob jobs[2] = {{ta, x.data(), n, ya.data()}, {tb, x.data(), n, yb.data()}};
      matmul_internal::matmul_many_with_isa(CpuIsa::kAvx512Bf16, jobs, &pool);
      ASSERT_EQ(0, std::memcmp(ya.data(), want_a.data(), want_a.size() * 4)) << "threads " << threads;
      ASSERT_EQ(0, std::memcmp(yb.data(), want_b.data(), want_b.size() * 4)) << "threads " << threads;
      for (size_t g = want_a.size(); g < ya.size(); ++g) ASSERT_EQ(ya[g], -7.0f) << "guard a, threads " << threads;
      for (size_t g = want_b.size(); g < yb.size(); ++g) ASSERT_EQ(yb[g], -7.0f) << "guard b, threads " << threads;
    }
  }
}

// matmul_many over the 5 products (views[j] . xs[j], n rows each) on 1, 2 and 3 threads gives
// each one's one-product, one-thread matmul bit for bit, at `isa`.
void expect_many_equals_single(CpuIsa isa, const WeightView (&views)[5], const float* const (&xs)[5], int64_t n) {
  std::vector<std::vector<float>> want;
  for (int j = 0; j < 5; ++j) {
    want.emplace_back(static_cast<size_t>(n * views[j].rows));
    matmul_internal::matmul_with_isa(isa, views[j], xs[j], n, want[j].data(), nullptr);
  }
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<std::vector<float>> got;
    std::vector<MatmulJob> jobs;
    for (int j = 0; j < 5; ++j) got.emplace_back(want[j].size(), -7.0f);
    for (int j = 0; j < 5; ++j) jobs.push_back({views[j], xs[j], n, got[j].data()});
    matmul_internal::matmul_many_with_isa(isa, jobs, &pool);
    for (int j = 0; j < 5; ++j) {
      ASSERT_EQ(0, std::memcmp(got[j].data(), want[j].data(), want[j].size() * 4)) << "threads " << threads << " job " << j;
    }
  }
}

// Products of one x (Q, K, V; gate, up) share its prepared activations, and prefill-sized
// preparation runs split over the pool: every output equals the one-product, one-thread matmul
// bit for bit, on each FP8 path, with a same-x product of another dtype (its own layout) and
// one of a different x between them.
TEST(MatmulMany, SharedXAndParallelPreparationChangeNoResult) {
  if (!have_fp8_kernel()) GTEST_SKIP() << "no AVX-512 with VBMI";
  const int64_t n = 100, cols = 1024;  // 100 x 1,024 elements: above the parallel threshold
  const QuantMatrix q = random_fp8(96, cols, 71), k = random_fp8(40, cols, 72), v = random_fp8(40, cols, 73);
  const QuantMatrix i4 = random_int4(48, cols, 32, 74), other = random_fp8(24, cols, 75);
  const std::vector<float> x = random_x(n, cols, 76), x2 = random_x(n, cols, 77);
  const float* xs[5] = {x.data(), x.data(), x.data(), x2.data(), x.data()};
  for (bool amx : fp8_amx_modes()) {
    const AmxUse use = testing::amx_use(amx);
    const WeightView views[5] = {with_amx(q.view, use), with_amx(k.view, use), i4.view, with_amx(other.view, use),
                                 with_amx(v.view, use)};
    SCOPED_TRACE(amx ? "amx" : "vdpbf16ps");
    expect_many_equals_single(CpuIsa::kAvx512Bf16, views, xs, n);
  }
}

// The AVX2 kernels in matmul_many: the 16-row tile layouts and row-major INT4 / INT8 of one x
// share one prepared copy (one layout, kernels/internal/int8t_x.h), a product of another x
// prepares its own, and an FP8 product between them takes the fallback; the preparation runs
// split over the pool. Every output equals the one-product, one-thread matmul bit for bit.
TEST(MatmulMany, Avx2SharedXAndParallelPreparationChangeNoResult) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  const int64_t n = 100, cols = 1024;
  const QuantMatrix a = random_int4_f16(96, cols, 32, 81), b = random_int8(48, cols, 82), c = random_int4(40, cols, 32, 83);
  const QuantMatrix d = random_int8(32, cols, 84), e = random_fp8(24, cols, 85);
  std::vector<uint8_t> sa, sb;
  const WeightView ta = int4_group_tile16(a.view, testing::aligned_bytes(sa, int4_group_tile8_bytes(a.view)));
  const WeightView tb = int8_group_tile16(b.view, testing::aligned_bytes(sb, int8_group_tile16_bytes(b.view)));
  const std::vector<float> x = random_x(n, cols, 86), x2 = random_x(n, cols, 87);
  const WeightView views[5] = {ta, tb, c.view, d.view, e.view};
  const float* xs[5] = {x.data(), x.data(), x.data(), x2.data(), x.data()};
  expect_many_equals_single(CpuIsa::kAvx2, views, xs, n);
}

// MatmulJob::x_rows: products that read their rows of a shared x in place (an MoE layer's
// experts) give the products of those rows copied out in fp32, bit for bit, on every path this
// CPU runs: the layouts whose prepared rows are copied (16-row INT8 / INT4 tiles, row-major INT4,
// FP8 and affine rows on AVX-512, the tiles on AVX2) and the ones that take fp32 copies (BF16,
// the scalar kernels and, where AMX-BF16 is granted, FP8 on AMX). Two products share each row
// list (gate and up), one product reads x whole (a shared expert: its preparation also serves the
// gathered ones), rows repeat and come in any order, and a list may hold one row or all of them.
TEST(MatmulMany, GatheredRowsEqualTheirCopy) {
  const int64_t src_rows = 80, cols = 1024;  // the fp32 copies of the three lists: enough to split over the pool
  const QuantMatrix i4 = random_int4_f16(64, cols, 32, 91), i8 = random_int8(48, cols, 92);
  const QuantMatrix i4rows = random_int4(32, cols, 32, 93), f8 = random_fp8(32, cols, 94);
  std::vector<uint8_t> s4, s8, sa;
  const WeightView t4 = int4_group_tile16(i4.view, testing::aligned_bytes(s4, int4_group_tile8_bytes(i4.view)));
  const WeightView t8 = int8_group_tile16(i8.view, testing::aligned_bytes(s8, int8_group_tile16_bytes(i8.view)));
  const testing::AffineMatrix q4k = testing::affine_matrix(ggml_type::kQ4_K, 32, cols, 95, AffineWidth::kPacked);
  std::optional<WeightView> q4k_tiles;
  if (affine_tileable(q4k.view)) {
    q4k_tiles = affine_tile16(q4k.view, testing::aligned_bytes(sa, static_cast<size_t>(q4k.view.rows * q4k.view.row_bytes())));
  }
  const Bf16Matrix b16 = random_bf16(24, cols, 96);
  std::vector<WeightView> views = {t4, t8, i4rows.view, q4k.view, b16.view};
  if (q4k_tiles) views.push_back(*q4k_tiles);
  const std::vector<float> x = random_x(src_rows, cols, 97);
  const std::vector<std::vector<int32_t>> lists = {{7}, {3, 3, 39, 0, 12, 5, 21, 21, 30, 1, 8, 16, 17, 2, 33, 4, 9}};
  std::vector<int32_t> all(src_rows);
  for (int32_t i = 0; i < src_rows; ++i) all[i] = src_rows - 1 - i;
  std::vector<CpuIsa> isas = {CpuIsa::kScalar};
  if (have_avx2()) isas.push_back(CpuIsa::kAvx2);
  if (have_avx512()) isas.push_back(CpuIsa::kAvx512Bf16);
  for (CpuIsa isa : isas) {
    for (bool amx : fp8_amx_modes()) {
      std::vector<WeightView> ws = views;
      if (isa != CpuIsa::kAvx512Bf16 || have_fp8_kernel()) ws.push_back(with_amx(f8.view, testing::amx_use(amx)));
      for (const WeightView& w : ws) {
        SCOPED_TRACE(std::string(cpu_isa_name(isa)) + " " + std::string(dtype_name(w.dtype)) + (amx ? " amx" : ""));
        // Per row list, two products (the same weight twice, as gate and up read one x); then
        // one product over x whole.
        const std::vector<const int32_t*> rows = {lists[0].data(), lists[1].data(), all.data()};
        const std::vector<int64_t> ns = {static_cast<int64_t>(lists[0].size()), static_cast<int64_t>(lists[1].size()),
                                         src_rows};
        std::vector<std::vector<float>> want, got;
        std::vector<MatmulJob> jobs;
        for (size_t k = 0; k < rows.size(); ++k) {
          std::vector<float> copy(static_cast<size_t>(ns[k] * cols));
          for (int64_t i = 0; i < ns[k]; ++i) std::copy_n(x.data() + rows[k][i] * cols, cols, copy.data() + i * cols);
          want.emplace_back(static_cast<size_t>(ns[k] * w.rows));
          matmul_internal::matmul_with_isa(isa, w, copy.data(), ns[k], want.back().data(), nullptr);
        }
        want.emplace_back(static_cast<size_t>(src_rows * w.rows));
        matmul_internal::matmul_with_isa(isa, w, x.data(), src_rows, want.back().data(), nullptr);
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          got.clear();
          jobs.clear();
          for (size_t k = 0; k < rows.size(); ++k) {
            for (int twice = 0; twice < 2; ++twice) got.emplace_back(want[k].size(), -7.0f);
          }
          got.emplace_back(want.back().size(), -7.0f);
          for (size_t k = 0; k < rows.size(); ++k) {
            for (int twice = 0; twice < 2; ++twice) {
              jobs.push_back({.w = w, .x = x.data(), .n = ns[k], .y = got[2 * k + twice].data(), .x_rows = rows[k],
                              .x_rows_of = src_rows});
            }
          }
          jobs.push_back({.w = w, .x = x.data(), .n = src_rows, .y = got.back().data()});
          matmul_internal::matmul_many_with_isa(isa, jobs, &pool);
          for (size_t k = 0; k < rows.size(); ++k) {
            for (int twice = 0; twice < 2; ++twice) {
              ASSERT_EQ(0, std::memcmp(got[2 * k + twice].data(), want[k].data(), want[k].size() * 4))
                  << "threads " << threads << " list " << k << " copy " << twice;
            }
          }
          ASSERT_EQ(0, std::memcmp(got.back().data(), want.back().data(), want.back().size() * 4)) << "threads " << threads;
        }
      }
    }
  }
}

// A row index outside x (MatmulJob::x_rows_of) is refused by name, not read.
TEST(MatmulManyDeathTest, GatheredRowOutsideXIsRefused) {
  const QuantMatrix i4 = random_int4(16, 256, 32, 98);
  const std::vector<float> x = random_x(4, 256, 99);
  std::vector<float> y(16 * 2);
  const int32_t rows[2] = {1, 4};
  const MatmulJob job{.w = i4.view, .x = x.data(), .n = 2, .y = y.data(), .x_rows = rows, .x_rows_of = 4};
  EXPECT_DEATH(matmul_many(std::span<const MatmulJob>(&job, 1), nullptr), "x row 4 of 4");
}

}  // namespace
}  // namespace densa
