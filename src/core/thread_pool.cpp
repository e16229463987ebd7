#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/halving_split.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DENSA_CPU_RELAX() _mm_pause()
#else
#define DENSA_CPU_RELAX() std::this_thread::yield()
#endif

namespace densa {

namespace {
// Chunk [begin, end) of worker `idx` out of `parts` for n items in units of grain.
std::pair<int64_t, int64_t> chunk_of(int64_t n, int64_t grain, int parts, int idx) {
  const int64_t units = (n + grain - 1) / grain;
  const int64_t per = units / parts, extra = units % parts;
  const int64_t ub = idx * per + std::min<int64_t>(idx, extra);
  const int64_t ue = ub + per + (idx < extra ? 1 : 0);
  return {std::min(n, ub * grain), std::min(n, ue * grain)};
}
}  // namespace

namespace {
int spin_from_env() {
  const char* v = std::getenv("DENSA_POOL_SPIN_US");
  if (v == nullptr || *v == '\0') return ThreadPool::kDefaultSpinUs;
  char* end = nullptr;
  const long us = std::strtol(v, &end, 10);
  return end != nullptr && *end == '\0' && us >= 0 && us <= 1000000 ? static_cast<int>(us) : ThreadPool::kDefaultSpinUs;
}
}  // namespace

ThreadPool::ThreadPool(int num_threads, int spin_us) : spin_us_(spin_us < 0 ? spin_from_env() : spin_us) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  scratch_.resize(static_cast<size_t>(num_threads_));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

// Polls `done` for up to spin_us_; true if it became true.
template <typename Done>
bool ThreadPool::spin_until(const Done& done) const {
  if (spin_us_ == 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
  for (int i = 0;; ++i) {
    if (done()) return true;
    DENSA_CPU_RELAX();
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() >= deadline) return done();
      // More threads than free cores: let a descheduled peer run instead of spinning it out.
      if ((i & 1023) == 1023) std::this_thread::yield();
    }
  }
}

namespace {
// Rounds of parts parallel_for_elems splits its items into, at most.
constexpr int64_t kElemRoundsMax = 4;
}  // namespace

void parallel_for_elems(ThreadPool* pool, int64_t count, int64_t work, const std::function<void(int64_t, int64_t)>& fn) {
  work = std::max<int64_t>(1, work);
  if (pool == nullptr || pool->num_threads() == 1 || count * work < 2 * kMinElemsPerThread) return fn(0, count);
  // Claimed dynamically in rounds of one part per thread, each round's parts half the size of
  // the round before (the last two rounds alike), while the smallest keeps kMinElemsPerThread
  // elements: a thread that falls behind leaves the small last parts to the others.
  const int64_t threads = pool->num_threads();
  const int64_t rounds = halving_rounds(count * work, threads, kMinElemsPerThread, kElemRoundsMax);
  // Item where claim k starts: claims before it weigh `before` of threads * halving_total(rounds).
  auto start = [&](int64_t k) {
    int64_t before = 0;
    for (int64_t r = 0; r < k / threads; ++r) before += threads * halving_weight(rounds, r);
    if (k / threads < rounds) before += k % threads * halving_weight(rounds, k / threads);
    return static_cast<int64_t>(static_cast<__int128>(count) * before / (threads * halving_total(rounds)));
  };
  pool->parallel_for_dynamic(threads * rounds, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t b = start(k), e = start(k + 1);
      if (b < e) fn(b, e);
    }
  });
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  dispatch(n, &fn, nullptr, grain, false);
}

void ThreadPool::parallel_for_dynamic(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (num_threads_ == 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, i + 1);
    return;
  }
  dispatch(n, &fn, nullptr, 1, true);
}

void ThreadPool::parallel_for_dynamic_on_workers(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (num_threads_ == 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(0, i, i + 1);
    return;
  }
  dispatch(n, nullptr, &fn, 1, true);
}

// This thread's part of the current job: its static chunk, or items claimed until none is left.
void ThreadPool::run_share(int worker_idx) {
  if (job_on_worker_ != nullptr) {
    const auto& job = *job_on_worker_;
    for (int64_t i = next_item_.fetch_add(1, std::memory_order_relaxed); i < job_n_;
         i = next_item_.fetch_add(1, std::memory_order_relaxed)) {
      job(worker_idx, i, i + 1);
    }
    return;
  }
  const auto& job = *job_;
  if (job_dynamic_) {
    for (int64_t i = next_item_.fetch_add(1, std::memory_order_relaxed); i < job_n_;
         i = next_item_.fetch_add(1, std::memory_order_relaxed)) {
      job(i, i + 1);
    }
    return;
  }
  auto [b, e] = chunk_of(job_n_, job_grain_, num_threads_, worker_idx);
  if (b < e) job(b, e);
}

void ThreadPool::dispatch(int64_t n, const std::function<void(int64_t, int64_t)>* fn,
                          const std::function<void(int, int64_t, int64_t)>* fn_on_worker, int64_t grain,
                          bool dynamic) {
  job_ = fn;
  job_on_worker_ = fn_on_worker;
  job_n_ = n;
  job_grain_ = grain;
  job_dynamic_ = dynamic;
  next_item_.store(0, std::memory_order_relaxed);
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  // seq_cst on both sides: either a worker going to sleep sees the new generation, or this
  // thread sees it among the sleepers and wakes it under the lock.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    sleeping_wakes_.fetch_add(1, std::memory_order_relaxed);
    { std::lock_guard<std::mutex> lock(mu_); }
    start_cv_.notify_all();
  }
  run_share(0);
  auto all_done = [this] { return pending_.load() == 0; };
  if (!spin_until(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_waiting_.store(true, std::memory_order_seq_cst);
    done_cv_.wait(lock, all_done);
    caller_waiting_.store(false, std::memory_order_relaxed);
  }
  job_ = nullptr;
  job_on_worker_ = nullptr;
}

void ThreadPool::worker_loop(int worker_idx) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] {
      return stop_.load() || generation_.load() != seen;  // seq_cst: pairs with parallel_for
    };
    if (!spin_until(ready)) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      start_cv_.wait(lock, ready);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_share(worker_idx);
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_waiting_.load(std::memory_order_seq_cst)) {
      { std::lock_guard<std::mutex> lock(mu_); }
      done_cv_.notify_one();
    }
  }
}

}  // namespace densa
