#include "disagg/ucx_pool.h"

#include <algorithm>

namespace densa::disagg {

UcxWorkerPool::UcxWorkerPool(const UcxContext& context, Limits limits) : context_(context), limits_(limits) {
  if (limits_.sweep) sweeper_ = std::thread([this] { sweep_loop(); });
}

UcxWorkerPool::~UcxWorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

void UcxWorkerPool::sweep_loop() {
  // Half the age, so an expired worker lives at most 1.5 x max_idle_age past its last use;
  // bounded below so a tiny age does not spin and above so a long one still sweeps.
  const auto period = std::clamp<std::chrono::milliseconds>(limits_.max_idle_age / 2, std::chrono::milliseconds(10),
                                                            std::chrono::milliseconds(5000));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_cv_.wait_for(lock, period, [&] { return stopping_; })) {
    lock.unlock();
    trim();
    lock.lock();
  }
}

void UcxWorkerPool::expire_locked(Clock::time_point now, std::deque<Idle>& out) {
  while (!idle_.empty() && (idle_.size() > limits_.max_idle || now - idle_.front().since > limits_.max_idle_age)) {
    out.push_back(std::move(idle_.front()));
    idle_.pop_front();
  }
}

void UcxWorkerPool::close_expired(std::deque<Idle>& expired) {
  if (expired.empty()) return;
  const size_t n = expired.size();
  expired.clear();  // destroys the workers, outside mu_
  std::lock_guard<std::mutex> lock(mu_);
  counts_.expired += n;
}

size_t UcxWorkerPool::trim() {
  std::deque<Idle> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    expire_locked(Clock::now(), expired);
  }
  const size_t n = expired.size();
  close_expired(expired);
  return n;
}

Result<std::unique_ptr<UcxWorker>> UcxWorkerPool::acquire(std::span<const uint8_t> peer) {
  std::deque<Idle> expired;
  std::unique_ptr<UcxWorker> found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    expire_locked(Clock::now(), expired);
    // The most recently used match: its connection is the likeliest to be alive.
    for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
      const std::vector<uint8_t>& p = it->worker->peer();
      if (std::equal(p.begin(), p.end(), peer.begin(), peer.end())) {
        found = std::move(it->worker);
        idle_.erase(std::next(it).base());
        ++counts_.reused;
        break;
      }
    }
  }
  close_expired(expired);
  if (found != nullptr) return found;
  Result<std::unique_ptr<UcxWorker>> w = UcxWorker::create(context_);
  if (!w.is_ok()) return w.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.created;
  }
  const Status connected = peer.empty() ? Status::ok() : (*w)->connect(peer);
  if (!connected.is_ok()) {
    w = connected;  // destroys the worker
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.discarded;
    return connected;
  }
  return w;
}

bool UcxWorkerPool::release(std::unique_ptr<UcxWorker> worker, bool keep) {
  if (worker == nullptr) return false;
  keep = keep && limits_.max_idle > 0 && worker->reusable();
  std::deque<Idle> expired;
  if (keep) {
    std::lock_guard<std::mutex> lock(mu_);
    worker->clear_ops();
    idle_.push_back({std::move(worker), Clock::now()});
    expire_locked(Clock::now(), expired);
  } else {
    worker.reset();  // cancels what is pending, closes its endpoint
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.discarded;
  }
  close_expired(expired);
  return keep;
}

UcxWorkerPool::Counts UcxWorkerPool::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counts c = counts_;
  c.idle = idle_.size();
  return c;
}

}  // namespace densa::disagg
