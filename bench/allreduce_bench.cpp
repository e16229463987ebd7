// The deterministic all-reduce of a tensor / expert parallel group (comm/communicator.h), both
// ways it can move the partials, on buffers of the sizes a step sums: hidden 2048 (the
// 30B-A3B-class shape) times 1, 16 and 64 rows (decode batches) and 512 rows (a prefill chunk).
//   gather          every rank gathers every rank's whole buffer, then adds them in rank order
//   reduce-scatter  each rank gathers a 1/N slice of every buffer and adds it, then every rank
//                   gathers the summed slices
// Both add in rank order, so they give the same bits (checked here on every size). Rounds
// alternate the two; each cell is the median over rounds of the mean time per call.
//
//   mpirun -n N ./build/allreduce_bench [--rounds R]   (N = 2, 4, ...; root: --allow-run-as-root)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"

namespace densa {
namespace {

using Clock = std::chrono::steady_clock;
using Algorithm = Communicator::AllReduceAlgorithm;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(int argc, char** argv) {
  int rounds = 7;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
  }
  Result<std::unique_ptr<Communicator>> made = mpi_world(60000);
  if (!made.is_ok()) {
    std::fprintf(stderr, "allreduce_bench: %s\n", made.status().message().c_str());
    return 1;
  }
  Communicator& world = **made;
  const int n_ranks = world.size();
  if (world.rank() == 0) {
    std::printf("# deterministic all-reduce over %d ranks, hidden 2048; us per call (median of %d rounds)\n", n_ranks,
                rounds);
    std::printf("%8s %12s %12s %16s %10s %10s\n", "rows", "bytes", "gather_us", "reduce_scatter_us", "ratio", "same_bits");
  }
  for (int rows : {1, 16, 64, 512}) {
    const int64_t n = int64_t{rows} * 2048;
    std::vector<float> input(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) input[static_cast<size_t>(i)] = 1e-3f * static_cast<float>((i * 7919 + world.rank() * 104729) % 2001 - 1000);
    std::vector<float> a = input, b = input;
    world.set_all_reduce_algorithm(Algorithm::kGather);
    world.all_reduce_sum(a.data(), n);
    world.set_all_reduce_algorithm(Algorithm::kReduceScatter);
    world.all_reduce_sum(b.data(), n);
    const bool same = std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    // Calls per timing: about 64 MiB of buffer traffic, at least 5.
    const int calls = std::max<int>(5, static_cast<int>((int64_t{64} << 20) / (n * 4)));
    std::vector<double> gather_us, scatter_us;
    std::vector<float> work = input;
    for (int r = 0; r < rounds; ++r) {
      for (Algorithm alg : {Algorithm::kGather, Algorithm::kReduceScatter}) {
        world.set_all_reduce_algorithm(alg);
        world.all_gather(int64_t{0});  // start together
        const auto t0 = Clock::now();
        for (int c = 0; c < calls; ++c) world.all_reduce_sum(work.data(), n);  // values may overflow: timing only
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls;
        (alg == Algorithm::kGather ? gather_us : scatter_us).push_back(us);
      }
    }
    if (world.rank() == 0) {
      const double g = median(gather_us), s = median(scatter_us);
      std::printf("%8d %12lld %12.1f %16.1f %10.2f %10s\n", rows, static_cast<long long>(n * 4), g, s, s / g,
                  same ? "yes" : "NO");
    }
    if (!same) return 2;
  }
  world.set_all_reduce_algorithm(Algorithm::kAuto);
  return 0;
}

}  // namespace
}  // namespace densa

int main(int argc, char** argv) { return densa::run(argc, argv); }
