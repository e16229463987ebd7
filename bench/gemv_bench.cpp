// Decode GEMV (n = 1) and a small prefill GEMM (n = 64) through kernels/matmul.h.
// GEMV reports weight_GB (a rate, shown as GB/s): weight bytes streamed per second (decimal GB), the number to hold
// against membw_bench. GEMM reports GFLOP (a rate, per second) (2 * n * rows * cols per call).
// Weights are replicated so that one pass over all copies is >= 512 MB, and successive calls
// walk the copies in turn: every call streams its weights from memory, as in real decode.
//
//   ./build/gemv_bench                                   # everything
//   ./build/gemv_bench --benchmark_filter='gemv/bf16'    # one dtype
//   ./build/gemv_bench --benchmark_filter='isa/'         # scalar vs avx2 vs avx512 per dtype
//   ./build/gemv_bench --benchmark_filter='gemv/(fp8|int4)'  # FP8 / INT4 (bytes include scales)
//   ./build/gemv_bench --benchmark_filter='gemm/n:512'  # prefill GEMM, FP8 vs INT4 vs bf16
//   ./build/gemv_bench --benchmark_filter='bf16'  # BF16 on AMX (x rounded) vs bf16_x32 (fp32 x, FMAs)
//   ./build/gemv_bench --benchmark_filter='affine/'  # GGUF K-quants in 16-row tiles: fallback vs AVX2 vs AVX-512
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/matmul.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"
#include "quant/int4_group.h"
#include "quant/int8_group.h"

namespace densa {
namespace {

constexpr int64_t kMinStreamBytes = int64_t{512} << 20;

struct Shape {
  int64_t rows, cols;
  const char* note;
};
constexpr Shape kShapes[] = {
    {4096, 4096, "4096x4096"},
    {4096, 14336, "4096x14336"},  // Mixtral 8x7B expert down projection
    {7168, 2048, "7168x2048"},    // Kimi K2 expert down projection
};
constexpr DType kDtypes[] = {DType::kF32,  DType::kBF16,  DType::kF16,  DType::kQ8_0,
                             DType::kQ4_0, DType::kA8G32, DType::kA8K16, DType::kA4G32, DType::kA4K};

uint32_t next_random(uint32_t& s) {
  s = s * 1664525u + 1013904223u;
  return s;
}

// Plausible values (no NaN/Inf/denormals) so the timing is that of real weights.
void fill_weights(DType dtype, uint8_t* p, int64_t rows, int64_t cols, uint32_t seed) {
  const int64_t count = rows * cols;
  switch (dtype) {
    case DType::kF32:
      for (int64_t k = 0; k < count; ++k) {
        const float v = static_cast<float>(static_cast<int32_t>(next_random(seed))) * 0x1p-34f;
        std::memcpy(p + 4 * k, &v, 4);
      }
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t k = 0; k < count; ++k) {
        const float v = static_cast<float>(static_cast<int32_t>(next_random(seed))) * 0x1p-34f;
        const uint16_t h = dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(p + 2 * k, &h, 2);
      }
      return;
    case DType::kQ8_0:
    case DType::kQ4_0: {
      const int64_t block_bytes = dtype_block_bytes(dtype);
      const uint16_t d = f32_to_f16(0.01f);
      for (int64_t b = 0; b < count / 32; ++b) {
        uint8_t* blk = p + b * block_bytes;
        std::memcpy(blk, &d, 2);
        for (int64_t j = 2; j < block_bytes; ++j) blk[j] = static_cast<uint8_t>(next_random(seed) >> 24);
      }
      return;
    }
    case DType::kFP8E4M3:
    case DType::kI4:
    case DType::kI8:
    case DType::kI32:
    case DType::kU8: return;
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4:
    case DType::kA8G32:
    case DType::kA4G32:
    case DType::kA4IQ4:
    case DType::kA4MXFP4: {  // affine rows (GGUF K-quants repacked): 4-bit codes, plausible scales
      const int64_t groups = affine_groups_per_block(dtype), code_bytes = affine_code_bytes(dtype);
      for (int64_t b = 0; b < count / kAffineBlock; ++b) {
        uint8_t* blk = p + b * dtype_block_bytes(dtype);
        for (int64_t j = 0; j < code_bytes; ++j) {
          blk[j] = static_cast<uint8_t>(next_random(seed) >> (code_bytes == kAffineBlock ? 28 : 24));
        }
        uint8_t* sb = blk + code_bytes;
        if (is_affine_super(dtype)) {  // D, M, int8 s and m
          const float d = 0.001f, m = -0.001f;
          std::memcpy(sb, &d, 4);
          std::memcpy(sb + 4, &m, 4);
          for (int64_t g = 0; g < 2 * groups; ++g) sb[8 + g] = static_cast<uint8_t>(10 + g);
          continue;
        }
        for (int64_t g = 0; g < groups; ++g) {
          const float scale = 0.01f, min = -0.08f;
          std::memcpy(sb + 4 * g, &scale, 4);
          std::memcpy(sb + 4 * (groups + g), &min, 4);
        }
      }
      return;
    }
  }
}

// Copies of one weight matrix, enough to defeat the last-level cache.
struct WeightSet {
  std::vector<std::unique_ptr<uint8_t[]>> copies;
  std::vector<WeightView> views;

  WeightSet(DType dtype, Shape s) {
    const int64_t bytes = s.rows * dtype_row_bytes(dtype, s.cols);
    const int64_t num = std::max<int64_t>(1, (kMinStreamBytes + bytes - 1) / bytes);
    for (int64_t c = 0; c < num; ++c) {
      copies.emplace_back(new uint8_t[bytes]);
      fill_weights(dtype, copies.back().get(), s.rows, s.cols, static_cast<uint32_t>(c + 1));
      views.push_back(WeightView{.dtype = dtype, .rows = s.rows, .cols = s.cols, .data = copies.back().get()});
    }
  }
};

// Times matmul of x (n rows of random values) against `views` in turn, one view per call, and
// reports weight_GB (`bytes` per call) and GFLOP as rates.
void time_products(benchmark::State& state, CpuIsa isa, const std::vector<WeightView>& views, Shape shape, int64_t n,
                   int threads, int64_t bytes) {
  std::vector<float> x(static_cast<size_t>(n * shape.cols)), y(static_cast<size_t>(n * shape.rows));
  uint32_t seed = 7;
  for (float& v : x) v = static_cast<float>(static_cast<int32_t>(next_random(seed))) * 0x1p-31f;
  ThreadPool pool(threads);
  size_t c = 0;
  for (auto _ : state) {
    matmul_internal::matmul_with_isa(isa, views[c], x.data(), n, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    c = (c + 1) % views.size();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["weight_GB"] = benchmark::Counter(iters * static_cast<double>(bytes) * 1e-9, benchmark::Counter::kIsRate);
  state.counters["GFLOP"] = benchmark::Counter(
      iters * 2.0 * static_cast<double>(n * shape.rows * shape.cols) * 1e-9, benchmark::Counter::kIsRate);
}

// exact_bf16: BF16 matrices keep fp32 activations (WeightView::amx = kOff) for this benchmark,
// so the AMX path ("bf16") and the FMA path ("bf16_x32") run in one process.
void run_matmul(benchmark::State& state, CpuIsa isa, DType dtype, Shape shape, int64_t n, int threads,
                bool exact_bf16) {
  WeightSet ws(dtype, shape);
  for (WeightView& v : ws.views) v.amx = exact_bf16 ? AmxUse::kOff : AmxUse::kAuto;
  time_products(state, isa, ws.views, shape, n, threads, ws.views[0].bytes());
}

// FP8 e4m3 with 128x128 block scales (fp32), or INT4 with group scales (bf16; group = 32 or
// 128): codes and scales, replicated like WeightSet. bytes counts codes plus scales as held in
// memory (INT4 g32: 4.5 bits per weight).
struct QuantWeightSet {
  std::vector<std::unique_ptr<uint8_t[]>> codes;
  std::vector<std::vector<float>> scales_f32;      // FP8
  std::vector<std::vector<uint16_t>> scales_bf16;  // INT4
  std::vector<WeightView> views;
  int64_t bytes = 0;

  std::vector<std::unique_ptr<uint8_t[]>> tiles;  // INT4 g32 in 8-row tiles (64-byte aligned inside)

  // f16: INT4 scales as f16 (GGUF Q4_0 repacked at load) instead of bf16. tiled: 8 or 16, INT4
  // g32 copied into the 8- or 16-row tile layout (WeightLayout::kInt4Tiles8 / kInt4Tiles16);
  // INT8 (any nonzero value) into the 16-row tile layout; 0 keeps the rows.
  // hot: one copy only (no replication past the caches), to measure the kernel's compute ceiling.
  QuantWeightSet(DType dtype, int64_t group, Shape s, bool f16 = false, int tiled = 0, bool hot = false) {
    const bool fp8 = dtype == DType::kFP8E4M3;
    const int64_t code_bytes = s.rows * dtype_row_bytes(dtype, s.cols);
    const int64_t num_scales = fp8 ? ((s.rows + 127) / 128) * ((s.cols + 127) / 128) : s.rows * (s.cols / group);
    bytes = code_bytes + num_scales * (fp8 ? 4 : 2);
    const int64_t num = hot ? 1 : std::max<int64_t>(1, (kMinStreamBytes + bytes - 1) / bytes);
    for (int64_t c = 0; c < num; ++c) {
      codes.emplace_back(new uint8_t[code_bytes]);
      uint32_t seed = static_cast<uint32_t>(c + 1);
      for (int64_t k = 0; k < code_bytes; ++k) {
        uint8_t b = static_cast<uint8_t>(next_random(seed) >> 24);
        if (fp8 && (b & 0x7f) == 0x7f) b = static_cast<uint8_t>(b - 1);  // no NaN codes
        codes.back()[k] = b;
      }
      WeightView v{.dtype = dtype, .rows = s.rows, .cols = s.cols, .data = codes.back().get()};
      if (fp8) {
        scales_f32.emplace_back(static_cast<size_t>(num_scales), 0.01f);
        v.scales_f32 = scales_f32.back().data();
      } else {
        scales_bf16.emplace_back(static_cast<size_t>(num_scales), f16 ? f32_to_f16(0.01f) : f32_to_bf16(0.01f));
        (f16 ? v.scales_f16 : v.scales_bf16) = scales_bf16.back().data();
      }
      v.scale_rows = fp8 ? 128 : 1;
      v.scale_cols = fp8 ? 128 : group;
      if (tiled) {
        const bool int8 = dtype == DType::kI8;
        const int64_t n = int8 ? int8_group_tile16_bytes(v) : int4_group_tile8_bytes(v);
        tiles.emplace_back(new uint8_t[static_cast<size_t>(n + 64)]);
        uint8_t* at = tiles.back().get() + (64 - reinterpret_cast<uintptr_t>(tiles.back().get()) % 64) % 64;
        const std::span<uint8_t> dst(at, static_cast<size_t>(n));
        v = int8 ? int8_group_tile16(v, dst) : tiled == 16 ? int4_group_tile16(v, dst) : int4_group_tile8(v, dst);
        codes.back().reset();  // only the tiles stay
      }
      views.push_back(v);
    }
  }
};

void run_quant_matmul(benchmark::State& state, CpuIsa isa, DType dtype, int64_t group, Shape shape, int64_t n,
                      int threads, bool f16, int tiled, bool hot) {
  QuantWeightSet ws(dtype, group, shape, f16, tiled, hot);
  time_products(state, isa, ws.views, shape, n, threads, ws.bytes);
}

void register_quant(const std::vector<int>& thread_counts) {
  struct QuantCase {
    DType dtype;
    int64_t group;
    const char* name;
    bool f16 = false;  // INT4 scales as f16: GGUF Q4_0 as repacked at load
    int tiled = 0;  // INT4 g32 in 8- or 16-row tiles (kInt4Tiles8 / kInt4Tiles16), INT8 in 16-row tiles
  };
  constexpr QuantCase kCases[] = {{DType::kFP8E4M3, 128, "fp8_b128"},
                                  {DType::kI4, 32, "int4_g32"},
                                  {DType::kI4, 128, "int4_g128"},
                                  {DType::kI4, 32, "q4_0_repacked", true},
                                  {DType::kI4, 32, "int4_g32_tiles", false, 8},
                                  {DType::kI4, 32, "int4_g32_tiles16", false, 16},
                                  {DType::kI8, 32, "int8_g32", true},  // GGUF Q8_0 repacked, row-major
                                  {DType::kI8, 32, "int8_g32_tiles", true, 16},  // and in 16-row tiles
                                  {DType::kI4, 32, "q4_0_repacked_tiles", true, 8},
                                  {DType::kI4, 32, "q4_0_repacked_tiles16", true, 16}};
  const CpuIsa best = cpu_isa();
  for (const QuantCase& q : kCases) {
    const bool runs = q.dtype == DType::kI8 ? matmul_prefers_int8_tiles()
                      : q.tiled == 16        ? matmul_runs_int4_layout(WeightLayout::kInt4Tiles16)
                                             : matmul_runs_int4_layout(WeightLayout::kInt4Tiles8);
    if (q.tiled != 0 && !runs) continue;
    for (const Shape& s : {kShapes[1], kShapes[2]}) {
      for (int t : thread_counts) {
        const std::string name = std::string("gemv/") + q.name + "/" + s.note + "/threads:" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), run_quant_matmul, best, q.dtype, q.group, s, 1, t, q.f16, q.tiled, false)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
    // In cache: a 1024x1024 matrix (INT4 g32: 576 KiB) that stays in L2, one thread. The
    // kernel's compute ceiling; the layout that streams from memory fastest needs headroom here.
    {
      constexpr Shape kHot{1024, 1024, "1024x1024"};
      const std::string name = std::string("gemv_hot/") + q.name + "/" + kHot.note + "/threads:1";
      benchmark::RegisterBenchmark(name.c_str(), run_quant_matmul, best, q.dtype, q.group, kHot, 1, 1, q.f16, q.tiled, true)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
    // Prefill: 512 tokens through a Kimi K2 expert (GFLOP/s; FP8 vs INT4 vs bf16 below).
    for (int t : thread_counts) {
      const std::string name = std::string("gemm/n:512/") + q.name + "/" + kShapes[2].note + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), run_quant_matmul, best, q.dtype, q.group, kShapes[2], 512, t, q.f16, q.tiled, false)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    // The same GEMM at a shallow depth (K = 512): a tile pair's weights stay in L1 across the
    // x rows, so against the row above it shows what the weights' trips from L2 cost.
    for (int t : thread_counts) {
      constexpr Shape kShallow{7168, 512, "7168x512"};
      const std::string name = std::string("gemm/n:512/") + q.name + "/" + kShallow.note + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), run_quant_matmul, best, q.dtype, q.group, kShallow, 512, t, q.f16, q.tiled, false)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    // The decode-to-buffer fallback (every ISA below AVX-512) against the AVX-512 kernel.
    for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512Bf16}) {
      if (static_cast<int>(isa) > static_cast<int>(cpu_isa_hardware())) continue;
      const std::string name = "isa/" + std::string(cpu_isa_name(isa)) + "/gemv/" + q.name + "/" + kShapes[1].note + "/threads:1";
      benchmark::RegisterBenchmark(name.c_str(), run_quant_matmul, isa, q.dtype, q.group, kShapes[1], 1, 1, q.f16, q.tiled, false)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// GGUF affine rows (K-quants, IQ4) in the 16-row tile layout the loader gives them, at one ISA
// level: the exact fallback (scalar), the AVX2 kernels and the AVX-512 ones on the same tiles.
void run_affine_tiles(benchmark::State& state, CpuIsa isa, DType dtype, Shape shape, int64_t n, int threads) {
  WeightSet ws(dtype, shape);
  std::vector<std::unique_ptr<uint8_t[]>> tiles;
  for (WeightView& v : ws.views) {
    tiles.emplace_back(new uint8_t[static_cast<size_t>(v.bytes() + 64)]);
    uint8_t* at = tiles.back().get() + (64 - reinterpret_cast<uintptr_t>(tiles.back().get()) % 64) % 64;
    v = affine_tile16(v, std::span<uint8_t>(at, static_cast<size_t>(v.bytes())));
  }
  ws.copies.clear();  // only the tiles stay
  time_products(state, isa, ws.views, shape, n, threads, ws.views[0].bytes());
}

void register_affine(const std::vector<int>& thread_counts) {
  struct AffineCase {
    DType dtype;
    const char* name;
  };
  constexpr AffineCase kCases[] = {{DType::kA4K, "q4_k"}, {DType::kA8K32, "q5_k"}, {DType::kA8K16, "q6_k"},
                                   {DType::kA4KIQ4, "iq4_xs"}};
  constexpr Shape kGemm{2048, 2048, "2048x2048"};
  for (const AffineCase& a : kCases) {
    for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Bf16}) {
      if (static_cast<int>(isa) > static_cast<int>(cpu_isa_hardware())) continue;
      const std::string level = isa == CpuIsa::kScalar ? std::string("fallback") : std::string(cpu_isa_name(isa));
      for (int t : thread_counts) {
        const std::string tail = std::string(a.name) + "/threads:" + std::to_string(t);
        const std::string gemv = "affine/" + level + "/gemv/" + kShapes[0].note + "/" + tail;
        benchmark::RegisterBenchmark(gemv.c_str(), run_affine_tiles, isa, a.dtype, kShapes[0], 1, t)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        const std::string gemm = "affine/" + level + "/gemm/n:64/" + kGemm.note + "/" + tail;
        benchmark::RegisterBenchmark(gemm.c_str(), run_affine_tiles, isa, a.dtype, kGemm, 64, t)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

void register_all() {
  const CpuIsa best = cpu_isa();
  const int all = ThreadPool(0).num_threads();
  std::vector<int> thread_counts = {1};
  if (all > 1) thread_counts.push_back(all);
  for (DType dtype : kDtypes) {
    for (const Shape& s : kShapes) {
      for (int t : thread_counts) {
        const std::string name = "gemv/" + std::string(dtype_name(dtype)) + "/" + s.note + "/threads:" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), run_matmul, best, dtype, s, 1, t, false)->UseRealTime()->Unit(benchmark::kMicrosecond);
        if (dtype == DType::kBF16) {
          const std::string x32 = "gemv/bf16_x32/" + std::string(s.note) + "/threads:" + std::to_string(t);
          benchmark::RegisterBenchmark(x32.c_str(), run_matmul, best, dtype, s, 1, t, true)->UseRealTime()->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  // Every ISA level on one shape, one thread: what each dispatch level buys per dtype.
  for (DType dtype : kDtypes) {
    for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Bf16}) {
      if (static_cast<int>(isa) > static_cast<int>(cpu_isa_hardware())) continue;
      const std::string name = "isa/" + std::string(cpu_isa_name(isa)) + "/gemv/" + std::string(dtype_name(dtype)) + "/4096x4096/threads:1";
      benchmark::RegisterBenchmark(name.c_str(), run_matmul, isa, dtype, kShapes[0], 1, 1, false)->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
  }
  register_quant(thread_counts);
  register_affine(thread_counts);
  for (int t : thread_counts) {
    for (bool exact : {false, true}) {
      const std::string name = std::string("gemm/n:512/") + (exact ? "bf16_x32/" : "bf16/") + kShapes[2].note +
                               "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), run_matmul, best, DType::kBF16, kShapes[2], 512, t, exact)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  // Small prefill GEMM: 64 tokens through a 4096x4096 matrix.
  for (DType dtype : kDtypes) {
    for (int t : thread_counts) {
      const std::string name = "gemm/n:64/" + std::string(dtype_name(dtype)) + "/4096x4096/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), run_matmul, best, dtype, kShapes[0], 64, t, false)->UseRealTime()->Unit(benchmark::kMillisecond);
      if (dtype == DType::kBF16) {
        const std::string x32 = "gemm/n:64/bf16_x32/4096x4096/threads:" + std::to_string(t);
        benchmark::RegisterBenchmark(x32.c_str(), run_matmul, best, dtype, kShapes[0], 64, t, true)->UseRealTime()->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace
}  // namespace densa

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  densa::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
