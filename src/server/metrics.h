#pragma once
// Metrics: the server's Prometheus counters and latency histograms (thread-safe), rendered
// together with a snapshot of EngineStats as Prometheus text exposition format 0.0.4.
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace densa::server {

// Cumulative histogram with fixed upper bounds (seconds).
struct Histogram {
  std::vector<double> bounds;    // [num_buckets] ascending upper bounds; +Inf implied
  std::vector<uint64_t> counts;  // [num_buckets + 1] observations per bucket (not cumulative)
  double sum = 0.0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
};

// Latencies of one finished request, seconds; negative = not measured.
struct RequestTiming {
  double ttft_s = -1.0;  // submit -> first token
  double tpot_s = -1.0;  // mean time between output tokens (needs >= 2 tokens)
  double e2e_s = -1.0;   // submit -> last event
};

class Metrics {
 public:
  Metrics();
  void observe_request(const RequestTiming& timing);
  // `code` is the HTTP status sent for an API request.
  void count_response(int code);
  std::string render(const EngineStats& stats) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
  uint64_t responses_2xx_ = 0;
  uint64_t responses_4xx_ = 0;
  uint64_t responses_5xx_ = 0;
};

}  // namespace densa::server
