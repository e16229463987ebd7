#pragma once
// UcxWorkerPool: UCX workers kept between transfers, so a transfer does not pay for a fresh
// ucp_worker and a fresh connection to its peer (together 2-32 ms over tcp, 10-170 ms over
// shared memory per transfer on the development VM). A decode worker keeps unconnected receiving workers; a
// prefill worker keeps sending workers, each connected to one receiver's address. A worker is
// used by one transfer at a time: acquire() hands it out exclusively, release() takes it back
// only when UcxWorker::reusable() holds (every op of the transfer completed, no flush or close
// failed, nothing unmatched waits in it) and destroys it otherwise. So a failed, timed-out or
// cancelled transfer never leaves a worker behind whose late messages could reach a later
// transfer; together with the per-transfer UCX tags (kv_wire.h: a transfer id is never reused
// within a process) a page can only land in the receive posted for it.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>

#include "core/status.h"
#include "disagg/ucx_worker.h"

namespace densa::disagg {

class UcxWorkerPool {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    size_t max_idle = 16;                            // idle workers kept; the oldest go first
    std::chrono::milliseconds max_idle_age{60000};   // an idle worker older than this is closed
  };
  struct Counts {
    uint64_t created = 0;    // fresh workers (connected when acquired for a peer)
    uint64_t reused = 0;     // acquisitions served from the pool
    uint64_t discarded = 0;  // destroyed after a transfer: not reusable, released with keep = false,
                             // or their connection failed in acquire()
    size_t idle = 0;         // in the pool now
  };

  explicit UcxWorkerPool(const UcxContext& context) : UcxWorkerPool(context, Limits{}) {}
  UcxWorkerPool(const UcxContext& context, Limits limits) : context_(context), limits_(limits) {}
  UcxWorkerPool(const UcxWorkerPool&) = delete;
  UcxWorkerPool& operator=(const UcxWorkerPool&) = delete;

  // A worker for one transfer: with `peer` empty an unconnected one (a receiver), otherwise one
  // whose endpoint is connected to `peer` (a sender). Pooled when one fits, else fresh.
  Result<std::unique_ptr<UcxWorker>> acquire(std::span<const uint8_t> peer = {});
  // Takes `worker` back for later transfers if `keep` and it is reusable(); destroys it
  // otherwise. Returns whether it was kept.
  bool release(std::unique_ptr<UcxWorker> worker, bool keep = true);

  Counts counts() const;

 private:
  struct Idle {
    std::unique_ptr<UcxWorker> worker;
    Clock::time_point since;
  };
  // Moves idle workers past max_idle_age (and beyond max_idle) into `out`; mu_ held.
  void expire_locked(Clock::time_point now, std::deque<Idle>& out);

  const UcxContext& context_;
  const Limits limits_;
  mutable std::mutex mu_;
  std::deque<Idle> idle_;  // oldest first
  Counts counts_;
};

}  // namespace densa::disagg
