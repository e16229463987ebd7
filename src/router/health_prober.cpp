#include "router/health_prober.h"

#include <algorithm>
#include <vector>

#include <httplib.h>

namespace densa::router {

HealthProber::HealthProber(WorkerPool& pool, HealthProberConfig config) : pool_(pool), config_(config) {}

void HealthProber::probe(WorkerId id) {
  httplib::Client client(pool_.url(id).origin);
  client.set_connection_timeout(config_.connect_timeout);
  client.set_read_timeout(config_.read_timeout);
  client.set_keep_alive(false);
  httplib::Result r = client.Get("/health");
  if (!r) return pool_.set_probe_result(id, false, "GET /health: " + httplib::to_string(r.error()));
  if (r->status != 200) return pool_.set_probe_result(id, false, "GET /health: HTTP " + std::to_string(r->status));
  pool_.set_probe_result(id, true, "");
}

void HealthProber::probe_all(bool only_unhealthy) {
  std::vector<bool> healthy(pool_.num_workers(), false);
  if (only_unhealthy) {
    for (const WorkerSnapshot& w : pool_.snapshot()) healthy.at(static_cast<size_t>(w.id.value)) = w.healthy;
  }
  for (size_t i = 0; i < pool_.num_workers(); ++i) {
    if (only_unhealthy && healthy[i]) continue;
    try {
      probe(WorkerId(static_cast<int32_t>(i)));
    } catch (...) {
      pool_.set_probe_result(WorkerId(static_cast<int32_t>(i)), false, "GET /health: exception");
    }
  }
}

void HealthProber::start() {
  thread_ = std::thread([this] {
    const auto tick = std::min(config_.interval, std::max(config_.unhealthy_recheck, std::chrono::milliseconds(1)));
    auto next_full = std::chrono::steady_clock::now() + config_.interval;
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, tick, [&] { return stopping_; })) {
      lock.unlock();
      const bool full = std::chrono::steady_clock::now() >= next_full;
      if (full) next_full = std::chrono::steady_clock::now() + config_.interval;
      probe_all(/*only_unhealthy=*/!full);
      lock.lock();
    }
  });
}

void HealthProber::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace densa::router
