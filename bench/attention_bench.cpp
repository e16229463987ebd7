// Single-token decode attention over a paged KV cache: BF16 vs FP8 e4m3 pages (static and
// dynamic scales) at 1K, 8K and 32K tokens of context, GQA 32 query / 8 kv heads, head_dim
// 128 (and the gen-model presets' 16 / 4 of 64 at 1K and 4K), page size 16. Reports KV bytes
// read per token (K + V data + dynamic scales) and time per token (= per iteration). Each
// iteration reads a different layer of a cache of at least 256 MiB in transparent huge pages
// (as the engine's PagePool), so KV comes from DRAM as in a real many-layer decode step, not
// from the caches. The path is the process's (AMX tiles where the CPU has them; DENSA_AMX=0:
// AVX-512).
// DENSA_BENCH_SAME_LAYER=1 reads layer 0 every time instead (cache-resident: the compute
// alone). DENSA_BENCH_SCATTER=1 gives the sequence its pages in a random order, as a
// long-running server's free list does, instead of in address order.
//
//   ./build/attention_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include <sys/mman.h>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "quant/fp8.h"

namespace densa {
namespace {

constexpr int kPageSize = 16;
constexpr int64_t kMinCacheBytes = 256ll << 20;
constexpr int64_t kHuge = 2ll << 20;

// Head shapes: 0 = 32 query / 8 kv heads of 128 (Llama-3-8B class), 1 = 16 / 4 of 64 (the
// dense-336m and moe-959m-a336m presets of `densa gen-model`).
struct Shape {
  int heads, kv_heads, head_dim;
};
const Shape kShapes[] = {{32, 8, 128}, {16, 4, 64}};

struct Setup {
  DType dtype;
  KvScaleMode mode;
};

const Setup kSetups[] = {{DType::kBF16, KvScaleMode::kNone},
                         {DType::kFP8E4M3, KvScaleMode::kStatic},
                         {DType::kFP8E4M3, KvScaleMode::kDynamic}};

void BM_DecodeAttention(benchmark::State& state) {
  const int ctx = static_cast<int>(state.range(0));
  const Setup setup = kSetups[state.range(1)];
  const int threads = static_cast<int>(state.range(2));
  const Shape shape = kShapes[state.range(3)];
  const int kHeads = shape.heads, kKvHeads = shape.kv_heads, kHeadDim = shape.head_dim;
  KvLayout one{1, kKvHeads, kHeadDim, kPageSize, setup.dtype, setup.mode};
  const int num_pages = (ctx + kPageSize - 1) / kPageSize;
  const int64_t layer_bytes = one.page_bytes() * num_pages;
  const int layers = static_cast<int>(std::clamp<int64_t>(kMinCacheBytes / layer_bytes, 1, 64));
  KvLayout layout = one;
  layout.num_layers = layers;
  const int64_t bytes = layout.page_bytes() * num_pages;
  std::unique_ptr<uint8_t, decltype(&std::free)> pool_bytes(
      static_cast<uint8_t*>(std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge)), &std::free);
  madvise(pool_bytes.get(), (bytes + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);  // as the engine's PagePool
  std::vector<int32_t> table(num_pages);
  for (int p = 0; p < num_pages; ++p) table[p] = p;
  if (std::getenv("DENSA_BENCH_SCATTER") != nullptr) std::shuffle(table.begin(), table.end(), std::mt19937(3));
  const std::vector<int32_t> offsets = {0, num_pages};
  std::vector<float> scales(static_cast<size_t>(layers) * 2 * kKvHeads, 4.0f / kFp8E4M3Max);
  const KvView kv{layout, pool_bytes.get(), table, offsets,
                  setup.mode == KvScaleMode::kStatic ? scales.data() : nullptr};

  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int chunk = 256;
  std::vector<float> k(static_cast<size_t>(chunk) * kKvHeads * kHeadDim), v(k.size());
  std::vector<int32_t> seq(chunk, 0), pos(chunk);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (int l = 0; l < layers; ++l) {
    for (int b = 0; b < ctx; b += chunk) {
      const int n = std::min(chunk, ctx - b);
      for (int i = 0; i < n; ++i) pos[i] = b + i;
      kv_store(kv, l, k.data(), v.data(), std::span<const int32_t>(seq.data(), n),
               std::span<const int32_t>(pos.data(), n));
    }
  }
  std::vector<float> q(kHeads * kHeadDim), out(q.size());
  for (auto& x : q) x = nd(rng);
  ThreadPool tp(threads);
  const int32_t zero = 0, last = ctx - 1;
  int layer = 0;
  const bool same_layer = std::getenv("DENSA_BENCH_SAME_LAYER") != nullptr;
  for (auto _ : state) {
    paged_attention(kv, layer, q.data(), kHeads, 1.0f / std::sqrt(float(kHeadDim)),
                    std::span<const int32_t>(&zero, 1), std::span<const int32_t>(&last, 1),
                    out.data(), &tp);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    if (!same_layer) layer = (layer + 1) % layers;
  }
  const int64_t kv_bytes = static_cast<int64_t>(ctx) * kKvHeads * 2 *
                           (kHeadDim * one.elem_bytes() + (setup.mode == KvScaleMode::kDynamic ? 4 : 0));
  state.counters["kv_bytes_per_token"] = static_cast<double>(kv_bytes);
  state.SetBytesProcessed(state.iterations() * kv_bytes);
  state.SetLabel(std::string(dtype_name(setup.dtype)) +
                 (setup.mode == KvScaleMode::kStatic    ? " static"
                  : setup.mode == KvScaleMode::kDynamic ? " dynamic"
                                                        : ""));
}

// Args: context tokens, setup (0 bf16, 1 fp8 static, 2 fp8 dynamic), threads (0 = all),
// head shape (kShapes).
BENCHMARK(BM_DecodeAttention)
    ->ArgsProduct({{1024, 8192, 32768}, {0, 1, 2}, {1, 0}, {0}})
    ->ArgsProduct({{1024, 4096}, {0, 1, 2}, {1, 0}, {1}})
    ->ArgsProduct({{128}, {0, 1}, {1, 0}, {1}})
    ->ArgNames({"ctx", "kv", "threads", "shape"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace densa

BENCHMARK_MAIN();
