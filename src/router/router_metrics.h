#pragma once
// RouterMetrics: the router's Prometheus counters and upstream latency histograms
// (thread-safe), rendered with per-worker gauges from a WorkerPool snapshot.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "api/prometheus.h"
#include "router/worker_pool.h"

namespace densa::router {

class RouterMetrics {
 public:
  RouterMetrics();

  void count_request();                 // a /v1 completion request arrived
  void count_response(int http_status); // the status the client got
  void count_retry();                   // an attempt failed before the first byte; trying another pair
  void count_upstream_failure();        // an attempt failed (connect, read, worker-reported transfer error)
  void count_stream_failure();          // a worker failed after the first byte: the client got an error event
  void count_client_disconnect();       // the client left before the response ended
  // Seconds from sending to a worker to its first body byte, and to the end of its response.
  void observe_first_byte(double seconds);
  void observe_upstream(double seconds);

  std::string render(const std::vector<WorkerSnapshot>& workers) const;

 private:
  mutable std::mutex mu_;
  uint64_t requests_ = 0;
  uint64_t responses_2xx_ = 0, responses_4xx_ = 0, responses_5xx_ = 0;
  uint64_t retries_ = 0;
  uint64_t upstream_failures_ = 0;
  uint64_t stream_failures_ = 0;
  uint64_t client_disconnects_ = 0;
  api::Histogram first_byte_;
  api::Histogram upstream_;
};

}  // namespace densa::router
