// Single-token decode attention over a paged KV cache: BF16 vs FP8 e4m3 pages (static and
// dynamic scales) at 1K, 8K and 32K tokens of context, GQA 32 query / 8 kv heads, head_dim
// 128 (and the gen-model presets' 16 / 4 of 64 at 1K and 4K), page size 16. Reports KV bytes
// read per token (K + V data + dynamic scales) and time per token (= per iteration). Each
// iteration reads a different layer of a cache of at least 1 GiB in transparent huge pages
// (as the engine's PagePool), so KV comes from DRAM as in a real many-layer decode step, not
// from the caches. BM_DecodeAttention runs the process's path (AMX tiles where the CPU has
// them; DENSA_AMX=0: AVX-512); BM_PathsInterleaved runs the AVX-512 and AMX paths in turn.
// DENSA_BENCH_SAME_LAYER=1 makes BM_DecodeAttention read layer 0 every time instead
// (cache-resident: the compute alone). DENSA_BENCH_SCATTER=1 gives the sequence its pages in a
// random order, as a long-running server's free list does, instead of in address order.
// DENSA_BENCH_PAGE=N stores N tokens per page instead of 16. BM_PrefillAttention: a 512-token
// prompt's attention, all its queries in one call (cache-resident; the compute alone).
//
//   ./build/attention_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>


#include "core/check.h"
#include "core/huge_page_arena.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/internal/attention_isa.h"
#include "quant/fp8.h"

namespace densa {
namespace {

// Tokens per KV page: 16 (the engine's default), or DENSA_BENCH_PAGE.
int page_size() {
  static const int ps = std::getenv("DENSA_BENCH_PAGE") != nullptr ? std::max(1, std::atoi(std::getenv("DENSA_BENCH_PAGE"))) : 16;
  return ps;
}
// 1 GiB: more than this VM's 300 MiB of L3, so every layer comes from DRAM.
constexpr int64_t kMinCacheBytes = 1ll << 30;

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

// A cache of `ctx` tokens for one sequence in as many layers as fill kMinCacheBytes (at most
// 1024), stored from N(0, 1) K and V, in huge pages as the engine's PagePool.
struct BenchCache {
  KvLayout one, layout;
  int layers = 0;
  HugePages bytes;
  std::vector<int32_t> table, offsets;
  std::vector<float> scales;

  BenchCache(int ctx, const Setup& setup, const Shape& shape) {
    one = KvLayout{1, shape.kv_heads, shape.head_dim, page_size(), setup.dtype, setup.mode};
    const int num_pages = (ctx + page_size() - 1) / page_size();
    const int64_t layer_bytes = one.page_bytes() * num_pages;
    layers = static_cast<int>(std::clamp<int64_t>(kMinCacheBytes / layer_bytes, 1, 1024));
    layout = one;
    layout.num_layers = layers;
    bytes = HugePages::map(static_cast<size_t>(layout.page_bytes() * num_pages));  // as the engine's PagePool
    CHECK(bytes.data() != nullptr) << "attention_bench: cannot map the cache";
    table.resize(num_pages);
    for (int p = 0; p < num_pages; ++p) table[p] = p;
    if (std::getenv("DENSA_BENCH_SCATTER") != nullptr) std::shuffle(table.begin(), table.end(), std::mt19937(3));
    offsets = {0, num_pages};
    scales.assign(static_cast<size_t>(layers) * 2 * shape.kv_heads, 4.0f / kFp8E4M3Max);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int chunk = 256;
    std::vector<float> k(static_cast<size_t>(chunk) * shape.kv_heads * shape.head_dim), v(k.size());
    std::vector<int32_t> seq(chunk, 0), pos(chunk);
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    for (int l = 0; l < layers; ++l) {
      for (int b = 0; b < ctx; b += chunk) {
        const int n = std::min(chunk, ctx - b);
        for (int i = 0; i < n; ++i) pos[i] = b + i;
        kv_store(view(), l, k.data(), v.data(), std::span<const int32_t>(seq.data(), n),
                 std::span<const int32_t>(pos.data(), n));
      }
    }
  }
  KvView view() const {
    return KvView{layout, bytes.data(), table, offsets, layout.scale_mode == KvScaleMode::kStatic ? scales.data() : nullptr};
  }
  // K + V bytes (and dynamic scales) one decode step reads per layer.
  int64_t kv_bytes_per_token(int ctx) const {
    return static_cast<int64_t>(ctx) * one.num_kv_heads * 2 *
           (one.head_dim * one.elem_bytes() + (one.scale_mode == KvScaleMode::kDynamic ? 4 : 0));
  }
};

std::string setup_label(const Setup& setup) {
  return std::string(dtype_name(setup.dtype)) + (setup.mode == KvScaleMode::kStatic    ? " static"
                                                 : setup.mode == KvScaleMode::kDynamic ? " dynamic"
                                                                                       : "");
}

// One benchmark's arguments (context tokens, setup, threads, head shape), its cache, a query and
// the thread pool.
struct DecodeCase {
  int ctx;
  Setup setup;
  Shape shape;
  BenchCache cache;
  std::vector<float> q, out;
  ThreadPool pool;
  int32_t zero = 0, last;

  explicit DecodeCase(const benchmark::State& state)
      : ctx(static_cast<int>(state.range(0))),
        setup(kSetups[state.range(1)]),
        shape(kShapes[state.range(3)]),
        cache(ctx, setup, shape),
        q(static_cast<size_t>(shape.heads) * shape.head_dim),
        out(q.size()),
        pool(static_cast<int>(state.range(2))),
        last(ctx - 1) {
    std::mt19937 rng(2);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& x : q) x = nd(rng);
  }
  // One decode call on `layer` (path: the process's when null).
  void attend(int layer, const attention_internal::AttnPath* path) {
    const KvView kv = cache.view();
    const float scale = 1.0f / std::sqrt(float(shape.head_dim));
    const std::span<const int32_t> seq(&zero, 1), pos(&last, 1);
    if (path == nullptr) {
      paged_attention(kv, layer, q.data(), shape.heads, scale, seq, pos, out.data(), &pool);
    } else {
      attention_internal::paged_attention_with_path(*path, kv, layer, q.data(), shape.heads, scale, seq, pos,
                                                    out.data(), &pool);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
};

void BM_DecodeAttention(benchmark::State& state) {
  DecodeCase c(state);
  int layer = 0;
  const bool same_layer = std::getenv("DENSA_BENCH_SAME_LAYER") != nullptr;
  for (auto _ : state) {
    c.attend(layer, nullptr);
    if (!same_layer) layer = (layer + 1) % c.cache.layers;
  }
  const int64_t kv_bytes = c.cache.kv_bytes_per_token(c.ctx);
  state.counters["kv_bytes_per_token"] = static_cast<double>(kv_bytes);
  state.SetBytesProcessed(state.iterations() * kv_bytes);
  state.SetLabel(setup_label(c.setup));
}

// The AVX-512 and AMX paths on the same cache, one call each per iteration, alternating which goes
// first, each on a layer of its own (both from DRAM): this VM's speed drifts by tens of percent
// over seconds, and calls adjacent in time see the same machine, so their ratio is steadier than
// that of two separate runs. Reports each path's mean time per call and amx / avx512.
void BM_PathsInterleaved(benchmark::State& state) {
  using attention_internal::AttnPath;
  if (!attention_internal::attention_path_available(AttnPath::kAmx)) {
    state.SkipWithError("no AMX-BF16 on this CPU");
    return;
  }
  DecodeCase c(state);
  const AttnPath paths[2] = {AttnPath::kAvx512, AttnPath::kAmx};
  double seconds[2] = {0, 0};
  int layer = 0;
  int64_t calls = 0;
  for (auto _ : state) {
    for (int k = 0; k < 2; ++k) {
      const int which = (k + static_cast<int>(calls)) % 2;
      const auto t0 = std::chrono::steady_clock::now();
      c.attend(layer, &paths[which]);
      seconds[which] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      layer = (layer + 1) % c.cache.layers;
    }
    ++calls;
  }
  state.counters["avx512_us"] = seconds[0] / static_cast<double>(calls) * 1e6;
  state.counters["amx_us"] = seconds[1] / static_cast<double>(calls) * 1e6;
  state.counters["amx_over_avx512"] = seconds[1] / seconds[0];
  state.SetLabel(setup_label(c.setup));
}

// A prompt's attention: `ctx` queries at positions 0 .. ctx-1 of one sequence, each over the
// rows up to its own (causal), as one prefill step's call, on layer 0 (cache-resident after the
// first call: the compute, not DRAM). Reports prompt tokens per second.
void BM_PrefillAttention(benchmark::State& state) {
  DecodeCase c(state);
  const int n = c.ctx;
  std::vector<float> q(static_cast<size_t>(n) * c.shape.heads * c.shape.head_dim), out(q.size());
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& x : q) x = nd(rng);
  std::vector<int32_t> seq(static_cast<size_t>(n), 0), pos(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) pos[i] = i;
  const KvView kv = c.cache.view();
  const float scale = 1.0f / std::sqrt(float(c.shape.head_dim));
  for (auto _ : state) {
    paged_attention(kv, 0, q.data(), c.shape.heads, scale, seq, pos, out.data(), &c.pool);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()) * n, benchmark::Counter::kIsRate);
  state.SetLabel(setup_label(c.setup));
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

// Args as above; the context is the prompt.
BENCHMARK(BM_PrefillAttention)
    ->ArgsProduct({{512}, {0, 2}, {1}, {0, 1}})
    ->ArgNames({"ctx", "kv", "threads", "shape"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args as above.
BENCHMARK(BM_PathsInterleaved)
    ->ArgsProduct({{1024, 4096}, {0, 1, 2}, {1, 0}, {1}})
    ->ArgsProduct({{8192}, {0, 1, 2}, {0}, {0}})
    ->ArgNames({"ctx", "kv", "threads", "shape"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace densa

BENCHMARK_MAIN();
