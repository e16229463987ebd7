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
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds read_timeout{2000};
};

class HealthProber {
 public:
  HealthProber(WorkerPool& pool, HealthProberConfig config);
  ~HealthProber() { stop(); }
  HealthProber(const HealthProber&) = delete;
  HealthProber& operator=(const HealthProber&) = delete;

  // One round over all workers, on the caller's thread.
  void probe_all();
  // Starts the periodic thread (first round after one interval).
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
