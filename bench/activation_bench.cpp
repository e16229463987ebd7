// SwiGLU gate (silu_mul) per ISA level: the scalar loop (std::exp per element) against the
// AVX-512 kernel (polynomial exp, 16 lanes). Sizes: 2816 (the dense-336m preset's FFN, one
// decode token), 1408 (an expert of moe-959m-a336m) and 14336 (Mixtral 8x7B). Hot in cache:
// this is the arithmetic alone.
//
//   ./build/activation_bench
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/internal/activation_isa.h"

namespace densa {
namespace {

void BM_SiluMul(benchmark::State& state) {
  const int64_t count = state.range(0);
  const auto isa = static_cast<CpuIsa>(state.range(1));
  if (static_cast<int>(isa) > static_cast<int>(cpu_isa_hardware())) {
    state.SkipWithError("ISA not available on this CPU");
    return;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> gate(count), up(count), work(count);
  for (auto& v : gate) v = nd(rng);
  for (auto& v : up) v = nd(rng);
  for (auto _ : state) {
    work = gate;
    activation_internal::silu_mul_with_isa(isa, work.data(), up.data(), count);
    benchmark::DoNotOptimize(work.data());
  }
  state.SetItemsProcessed(state.iterations() * count);
  state.SetLabel(std::string(cpu_isa_name(isa)));
}

BENCHMARK(BM_SiluMul)->ArgsProduct({{1408, 2816, 14336}, {0, 2}})->ArgNames({"count", "isa"});

}  // namespace
}  // namespace densa

BENCHMARK_MAIN();
