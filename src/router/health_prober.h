#pragma once
// HealthProber: a thread that asks every worker's GET /health at a fixed interval and
// records the verdict in the WorkerPool (200 = healthy). Each probe has its own timeouts,
// so a hung worker delays the round by at most those.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "router/worker_pool.h"

namespace densa::router {

struct HealthProberConfig {
  std::chrono::milliseconds interval{1000};
  // A worker whose last probe failed is asked again after at most this long (not a whole
  // interval), so one lost probe - say at start-up on a loaded machine - does not keep a
  // live worker out for the full interval. Failure holds still apply (WorkerPool).
  std::chrono::milliseconds unhealthy_recheck{1000};
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds read_timeout{2000};
};

class HealthProber {
 public:
  HealthProber(WorkerPool& pool, HealthProberConfig config);
  ~HealthProber() { stop(); }
  HealthProber(const HealthProber&) = delete;
  HealthProber& operator=(const HealthProber&) = delete;

  // One round over all workers (or only the unhealthy ones), on the caller's thread.
  void probe_all(bool only_unhealthy = false);
  // Starts the periodic thread (first full round after one interval; unhealthy workers every
  // min(interval, unhealthy_recheck)).
  void start();
  void stop();

 private:
  void probe(WorkerId id);

  WorkerPool& pool_;
  HealthProberConfig config_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace densa::router
