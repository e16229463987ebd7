#pragma once
// The load generator of `densa bench serve`: runs one level (a fixed concurrency or a Poisson
// request rate) over a prompt list with one keep-alive connection per worker thread, and
// draws a progress bar on stderr while it runs.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tools/bench/bench_serve_client.h"
#include "tools/bench/bench_serve_metrics.h"

namespace densa::bench {

struct LoadPlan {
  int concurrency = 0;        // requests in flight at most; 0 = one worker per request
  double request_rate = 0;    // Poisson arrivals in req/s; 0 = send as soon as a worker is free
  uint64_t seed = 0;          // arrival times
  bool progress = true;       // progress bar on stderr (redrawn in place on a terminal)
  std::string label;          // shown before the bar, e.g. "concurrency 16"
};

struct LevelRun {
  std::vector<RequestRecord> records;  // [prompts.size()] in prompt order
  double duration_s = 0;               // first send to the end of the last response
};

// Arrival offsets (seconds) of n requests at `rate` req/s: exponential gaps, seeded; all zero
// when rate <= 0 or infinite.
std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed);

LevelRun run_level(const ClientOptions& client, std::span<const BenchPrompt> prompts, const LoadPlan& plan);

}  // namespace densa::bench
