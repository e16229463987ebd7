// Memory-bandwidth probe: streaming read of a 1 GiB buffer (far larger than any last-level
// cache) with 64-byte AVX-512 loads, on 1 thread and on all threads. Reports GB/s (decimal),
// the ceiling that gemv_bench's weight_GB/s is measured against. read_192MiB reads a buffer the
// size of dense-336m in INT4 g32 (189 MB): where the last-level cache is large (Emerald Rapids:
// 300 MiB shared), part of such a model stays cached between decode steps, and a roofline
// percentage against the 1 GiB read alone would overstate the kernel. read_{1,2,4}KiB_blocks_1MiB_apart
// read the way decode attention reads a paged KV cache (see read_row_blocks).
//
//   ./build/membw_bench --benchmark_min_time=2s

#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/huge_page_arena.h"
#include "core/thread_pool.h"

namespace densa {
namespace {

constexpr int64_t kChunkBytes = 256;  // one unrolled step: four 64-byte loads

// XOR of every 64-byte line, four independent chains; the result keeps the loads alive.
__attribute__((target("avx512f"))) uint64_t read_avx512(const uint8_t* p, int64_t bytes) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (int64_t k = 0; k < bytes; k += kChunkBytes) {
    a = _mm512_xor_si512(a, _mm512_load_si512(p + k));
    b = _mm512_xor_si512(b, _mm512_load_si512(p + k + 64));
    c = _mm512_xor_si512(c, _mm512_load_si512(p + k + 128));
    d = _mm512_xor_si512(d, _mm512_load_si512(p + k + 192));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d)));
  uint64_t s = 0;
  for (uint64_t v : lanes) s ^= v;
  return s;
}

uint64_t read_scalar(const uint8_t* p, int64_t bytes) {
  uint64_t s = 0;
  for (int64_t k = 0; k < bytes; k += 8) {
    uint64_t v;
    std::memcpy(&v, p + k, 8);
    s ^= v;
  }
  return s;
}

void read_bandwidth(benchmark::State& state, int threads, int64_t buffer_bytes) {
  auto deleter = [](uint8_t* p) { std::free(p); };
  std::unique_ptr<uint8_t, decltype(deleter)> buf(
      static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(buffer_bytes))), deleter);
  std::memset(buf.get(), 1, static_cast<size_t>(buffer_bytes));  // fault every page in
  const bool avx512 = cpu_isa_hardware() == CpuIsa::kAvx512Bf16;
  ThreadPool pool(threads);
  const int64_t num_chunks = buffer_bytes / kChunkBytes;
  const int64_t grain = num_chunks / 64;
  uint64_t sink[64] = {};  // one slot per grain-sized chunk start
  for (auto _ : state) {
    pool.parallel_for(num_chunks, [&](int64_t begin, int64_t end) {
      const uint8_t* p = buf.get() + begin * kChunkBytes;
      const int64_t bytes = (end - begin) * kChunkBytes;
      const uint64_t v = avx512 ? read_avx512(p, bytes) : read_scalar(p, bytes);
      sink[begin / grain] ^= v;
    }, grain);
    benchmark::DoNotOptimize(sink);
  }
  state.counters["GB"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(buffer_bytes) * 1e-9,
      benchmark::Counter::kIsRate);
}

// The access pattern of decode attention over a paged KV cache: row blocks of block_bytes (2 KiB:
// 16 positions of one kv head, bf16, head_dim 64; 1 KiB: the same in FP8) 1 MiB apart (the next
// page), in a 1 GiB buffer (more than this VM's 300 MiB L3) in transparent huge pages, as the KV
// pool is. Each iteration reads every byte once: block offset r outer, pages inner, the pages
// split over the threads.
void read_row_blocks(benchmark::State& state, int threads, int64_t block_bytes) {
  constexpr int64_t kPage = 1 << 20, kBytes = int64_t{1024} << 20, kPages = kBytes / kPage;
  const HugePages buf = HugePages::map(kBytes);  // as the engine's KV pool
  CHECK(buf.data() != nullptr) << "membw_bench: cannot map " << kBytes << " bytes";
  std::memset(buf.data(), 1, static_cast<size_t>(kBytes));
  const bool avx512 = cpu_isa_hardware() == CpuIsa::kAvx512Bf16;
  ThreadPool pool(threads);
  std::vector<uint64_t> sink(kPages);
  for (auto _ : state) {
    for (int64_t r = 0; r < kPage / block_bytes; ++r) {
      pool.parallel_for(kPages, [&](int64_t begin, int64_t end) {
        for (int64_t pg = begin; pg < end; ++pg) {
          const uint8_t* p = buf.data() + pg * kPage + r * block_bytes;
          sink[pg] ^= avx512 ? read_avx512(p, block_bytes) : read_scalar(p, block_bytes);
        }
      }, kPages / threads);
    }
    benchmark::DoNotOptimize(sink.data());
  }
  state.counters["GB"] = benchmark::Counter(static_cast<double>(state.iterations()) * kBytes * 1e-9,
                                            benchmark::Counter::kIsRate);
}

}  // namespace
}  // namespace densa

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const int all = densa::ThreadPool(0).num_threads();
  for (int t : {1, all}) {
    for (int64_t mib : {1024, 192}) {
      const std::string name = "membw/read_" + (mib == 1024 ? std::string("1GiB") : std::to_string(mib) + "MiB") +
                               "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), densa::read_bandwidth, t, mib << 20)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    if (all == 1) break;
  }
  for (int t : {1, all}) {
    for (int64_t kib : {1, 2, 4}) {
      const std::string name = "membw/read_" + std::to_string(kib) + "KiB_blocks_1MiB_apart/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), densa::read_row_blocks, t, kib << 10)->UseRealTime()->Unit(benchmark::kMillisecond);
    }
    if (all == 1) break;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
