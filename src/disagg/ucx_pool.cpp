#include "disagg/ucx_pool.h"

#include <algorithm>

namespace densa::disagg {

void UcxWorkerPool::expire_locked(Clock::time_point now, std::deque<Idle>& out) {
  while (!idle_.empty() && (idle_.size() > limits_.max_idle || now - idle_.front().since > limits_.max_idle_age)) {
    out.push_back(std::move(idle_.front()));
    idle_.pop_front();
  }
}

Result<std::unique_ptr<UcxWorker>> UcxWorkerPool::acquire(std::span<const uint8_t> peer) {
  std::deque<Idle> expired;  // destroyed after the lock is dropped
  {
    std::lock_guard<std::mutex> lock(mu_);
    expire_locked(Clock::now(), expired);
    // The most recently used match: its connection is the likeliest to be alive.
    for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
      const std::vector<uint8_t>& p = it->worker->peer();
      if (std::equal(p.begin(), p.end(), peer.begin(), peer.end())) {
        std::unique_ptr<UcxWorker> w = std::move(it->worker);
        idle_.erase(std::next(it).base());
        ++counts_.reused;
        return w;
      }
    }
  }
  Result<std::unique_ptr<UcxWorker>> w = UcxWorker::create(context_);
  if (!w.is_ok()) return w.status();
  const Status connected = peer.empty() ? Status::ok() : (*w)->connect(peer);
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.created;
  if (!connected.is_ok()) {
    ++counts_.discarded;
    return connected;  // the worker is destroyed on the way out
  }
  return w;
}

bool UcxWorkerPool::release(std::unique_ptr<UcxWorker> worker, bool keep) {
  if (worker == nullptr) return false;
  keep = keep && limits_.max_idle > 0 && worker->reusable();
  std::deque<Idle> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!keep) {
      ++counts_.discarded;
    } else {
      worker->clear_ops();
      idle_.push_back({std::move(worker), Clock::now()});
      expire_locked(Clock::now(), expired);
    }
  }
  worker.reset();  // a discarded worker: cancels what is pending, closes its endpoint
  return keep;
}

UcxWorkerPool::Counts UcxWorkerPool::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counts c = counts_;
  c.idle = idle_.size();
  return c;
}

}  // namespace densa::disagg
