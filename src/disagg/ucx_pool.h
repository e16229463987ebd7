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
//
// Every pooled worker holds file descriptors (its event fds, and one socket per peer that
// connected to it over tcp, dead peers included). An idle worker past max_idle_age is closed
// by a sweeper thread even when no transfer comes, so a quiet process gives back what a burst
// of transfers or a restarted peer made it hold: the fds of a worker that has been idle for
// max_idle_age are released within max_idle_age / 2 more.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "core/status.h"
#include "disagg/ucx_worker.h"

namespace densa::disagg {

class UcxWorkerPool {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    size_t max_idle = 16;                            // idle workers kept; the oldest go first
    std::chrono::milliseconds max_idle_age{60000};   // an idle worker older than this is closed
    bool sweep = true;  // a thread closes expired idle workers between transfers too
  };
  struct Counts {
    uint64_t created = 0;    // fresh workers (connected when acquired for a peer)
    uint64_t reused = 0;     // acquisitions served from the pool
    uint64_t discarded = 0;  // destroyed after a transfer: not reusable, released with keep = false,
                             // or their connection failed in acquire()
    uint64_t expired = 0;    // idle workers closed past max_idle_age or beyond max_idle
    size_t idle = 0;         // in the pool now
    // Workers alive now, idle or carrying a transfer.
    uint64_t live() const { return created - discarded - expired; }
  };

  explicit UcxWorkerPool(const UcxContext& context) : UcxWorkerPool(context, Limits{}) {}
  UcxWorkerPool(const UcxContext& context, Limits limits);
  ~UcxWorkerPool();
  UcxWorkerPool(const UcxWorkerPool&) = delete;
  UcxWorkerPool& operator=(const UcxWorkerPool&) = delete;

  // A worker for one transfer: with `peer` empty an unconnected one (a receiver), otherwise one
  // whose endpoint is connected to `peer` (a sender). Pooled when one fits, else fresh.
  Result<std::unique_ptr<UcxWorker>> acquire(std::span<const uint8_t> peer = {});
  // Takes `worker` back for later transfers if `keep` and it is reusable(); destroys it
  // otherwise. Returns whether it was kept.
  bool release(std::unique_ptr<UcxWorker> worker, bool keep = true);

  Counts counts() const;

  // Closes the idle workers past max_idle_age now; returns how many. The sweeper calls it.
  size_t trim();

 private:
  struct Idle {
    std::unique_ptr<UcxWorker> worker;
    Clock::time_point since;
  };
  // Moves idle workers past max_idle_age (and beyond max_idle) into `out`; mu_ held.
  void expire_locked(Clock::time_point now, std::deque<Idle>& out);
  // Destroys `expired` (mu_ not held), then counts them: counts() never shows a worker as gone
  // while its fds are still open.
  void close_expired(std::deque<Idle>& expired);
  void sweep_loop();

  const UcxContext& context_;
  const Limits limits_;
  mutable std::mutex mu_;
  std::deque<Idle> idle_;  // oldest first
  Counts counts_;
  bool stopping_ = false;  // mu_; tells the sweeper to end
  std::condition_variable stop_cv_;
  std::thread sweeper_;  // last: started after every other member exists
};

}  // namespace densa::disagg
