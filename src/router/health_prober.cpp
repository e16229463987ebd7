#include "router/health_prober.h"

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

void HealthProber::probe_all() {
  for (size_t i = 0; i < pool_.num_workers(); ++i) {
    try {
      probe(WorkerId(static_cast<int32_t>(i)));
    } catch (...) {
      pool_.set_probe_result(WorkerId(static_cast<int32_t>(i)), false, "GET /health: exception");
    }
  }
}

void HealthProber::start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, config_.interval, [&] { return stopping_; })) {
      lock.unlock();
      probe_all();
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
