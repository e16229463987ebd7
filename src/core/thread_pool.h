#pragma once
// A fixed pool of worker threads for kernels. parallel_for splits [0, n) into contiguous
// chunks, one per thread, so a given (n, num_threads, grain) always gives the same partition
// and the same reduction order per output element.
//
// Hand-off: a decode step issues hundreds of short parallel_for calls (one per matmul and
// attention call), so waking a sleeping thread each time (a futex wake, and on a VM an
// inter-processor interrupt) would cost more than the work. Workers and the caller therefore
// spin on atomics for up to `spin_us` after their last job before they sleep on a condition
// variable; an idle pool sleeps and costs nothing.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/worker_scratch.h"

namespace densa {

class ThreadPool;

// Elementwise work (copies, norms, activations) worth splitting: at least this many elements
// per thread, so the hand-off stays small next to the work.
inline constexpr int64_t kMinElemsPerThread = int64_t{1} << 15;

// fn(begin, end) over [0, count) items of about `work` elements each: on the pool in chunks of
// at least kMinElemsPerThread elements when there are enough for two threads, else as one call
// on this thread (also when pool is null or has one thread). The chunks are claimed dynamically,
// the largest first, so which thread runs which items differs from call to call: for work whose
// every item's result is made whole in one call of fn.
void parallel_for_elems(ThreadPool* pool, int64_t count, int64_t work, const std::function<void(int64_t, int64_t)>& fn);

class ThreadPool {
 public:
  static constexpr int kDefaultSpinUs = 2000;

  // num_threads <= 0 means all hardware threads. spin_us: how long a thread polls for the
  // next job (workers) or for the others to finish (the caller) before it sleeps; 0 sleeps
  // at once; < 0 takes DENSA_POOL_SPIN_US from the environment, else kDefaultSpinUs.
  explicit ThreadPool(int num_threads = 0, int spin_us = -1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n); chunks are multiples of
  // `grain` except the last. Blocks until all chunks finish. Not reentrant.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // Calls fn(i, i + 1) once for every i in [0, n), each i claimed by whichever thread is free
  // next (an atomic counter), so a thread slowed by an interrupt, a descheduling or a slower
  // share of memory bandwidth takes fewer items. For items whose results do not depend on
  // which thread runs them; the assignment differs from call to call. Not reentrant.
  void parallel_for_dynamic(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
  // The same with fn(worker, i, i + 1): worker is the index of the thread running item i, in
  // [0, num_threads()), 0 being the calling thread, for fn to use that thread's scratch(worker).
  void parallel_for_dynamic_on_workers(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);

  // Scratch memory of thread `worker` (0: the calling thread; see parallel_for_dynamic_on_workers),
  // kept for the pool's lifetime. Kernels running in this pool's jobs, or on its calling thread
  // between jobs, take their buffers here; a thread touches only its own.
  WorkerScratch& scratch(int worker) { return scratch_[static_cast<size_t>(worker)]; }

  // The spin budget in microseconds this pool was built with (after the environment).
  int spin_us() const { return spin_us_; }

  // Jobs handed out so far and how many of them found a worker asleep (a futex wake was
  // needed): a cheap check that the hand-off stays on the spinning path.
  uint64_t jobs() const { return generation_.load(std::memory_order_relaxed); }
  uint64_t sleeping_wakes() const { return sleeping_wakes_.load(std::memory_order_relaxed); }

 private:
  void worker_loop(int worker_idx);
  void run_share(int worker_idx);
  void dispatch(int64_t n, const std::function<void(int64_t, int64_t)>* fn,
                const std::function<void(int, int64_t, int64_t)>* fn_on_worker, int64_t grain, bool dynamic);
  template <typename Done>
  bool spin_until(const Done& done) const;

  int num_threads_;
  int spin_us_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  // Written by the caller before generation_ is bumped (release), read by workers after
  // they see the new generation (acquire).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  const std::function<void(int, int64_t, int64_t)>* job_on_worker_ = nullptr;  // instead of job_
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  bool job_dynamic_ = false;
  std::atomic<int64_t> next_item_{0};  // dynamic jobs: the next unclaimed item
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};          // workers blocked (or about to block) on start_cv_
  std::atomic<bool> caller_waiting_{false};  // the caller blocked on done_cv_
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sleeping_wakes_{0};
  std::vector<WorkerScratch> scratch_;  // [num_threads_]
};

}  // namespace densa
