// ThreadPool: every item is covered exactly once, chunks follow the grain, and the spinning
// hand-off and the sleeping one give the same results, back to back and after idle gaps; the
// dynamic mode covers every item once and lets a fast thread take a slow one's share, and
// tells each item which worker runs it.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <chrono>
#include <thread>
#include <vector>

namespace densa {
namespace {

// Runs many jobs of varied sizes and checks every item was visited once by a chunk that starts
// on a grain boundary.
void check_coverage(ThreadPool& pool, int jobs) {
  for (int j = 0; j < jobs; ++j) {
    const int64_t n = 1 + (j * 37) % 301;
    const int64_t grain = 1 + j % 9;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> bad_start{0};
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      if (b % grain != 0) bad_start.fetch_add(1);
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    }, grain);
    ASSERT_EQ(bad_start.load(), 0) << "job " << j;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "job " << j << " item " << i;
  }
}

TEST(ThreadPool, SpinningHandOffCoversEveryItemOnce) {
  ThreadPool pool(3, 5000);
  check_coverage(pool, 2000);
  EXPECT_GE(pool.jobs(), 1000u);  // most jobs have n > grain and go through the hand-off
}

TEST(ThreadPool, SleepingHandOffCoversEveryItemOnce) {
  ThreadPool pool(3, 0);  // no spinning: every job wakes sleeping workers
  check_coverage(pool, 500);
  EXPECT_GT(pool.sleeping_wakes(), 0u);
}

TEST(ThreadPool, WorkersFallAsleepWhenIdleAndStillWake) {
  ThreadPool pool(2, 200);  // 200 us of spinning, then sleep
  check_coverage(pool, 50);
  const uint64_t wakes_before = pool.sleeping_wakes();
  for (int round = 0; round < 5; ++round) {
    // Long past the spin window: the worker is asleep and must be woken.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    check_coverage(pool, 3);  // jobs 0..2: n = 1, 38, 75 with grain 1, 2, 3
  }
  EXPECT_GT(pool.sleeping_wakes(), wakes_before);
}

TEST(ThreadPool, EnvironmentSetsSpin) {
  // The spin budget comes from DENSA_POOL_SPIN_US when the constructor is not given one, and
  // an unusable value falls back to the default. With 0 every hand-off after a gap finds the
  // worker asleep.
  ASSERT_EQ(setenv("DENSA_POOL_SPIN_US", "0", 1), 0);
  {
    ThreadPool pool(2);
    EXPECT_EQ(pool.spin_us(), 0);
    for (int round = 0; round < 5; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::atomic<int64_t> sum{0};
      pool.parallel_for(100, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
      ASSERT_EQ(sum.load(), 100);
    }
    EXPECT_GE(pool.sleeping_wakes(), 3u);  // 5 unless the worker was not even scheduled in a gap
  }
  ASSERT_EQ(setenv("DENSA_POOL_SPIN_US", "750", 1), 0);
  EXPECT_EQ(ThreadPool(2).spin_us(), 750);
  EXPECT_EQ(ThreadPool(2, 40).spin_us(), 40);  // an explicit budget wins over the environment
  ASSERT_EQ(setenv("DENSA_POOL_SPIN_US", "fast", 1), 0);
  EXPECT_EQ(ThreadPool(2).spin_us(), ThreadPool::kDefaultSpinUs);
  ASSERT_EQ(unsetenv("DENSA_POOL_SPIN_US"), 0);
  EXPECT_EQ(ThreadPool(2).spin_us(), ThreadPool::kDefaultSpinUs);
}

TEST(ThreadPool, DynamicCoversEveryItemOnce) {
  for (int spin : {5000, 0}) {
    ThreadPool pool(3, spin);
    for (int j = 0; j < 300; ++j) {
      const int64_t n = 1 + (j * 37) % 101;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_range{0};
      pool.parallel_for_dynamic(n, [&](int64_t b, int64_t e) {
        if (e != b + 1) bad_range.fetch_add(1);
        hits[static_cast<size_t>(b)].fetch_add(1);
      });
      ASSERT_EQ(bad_range.load(), 0);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "job " << j << " item " << i;
    }
  }
}

// The worker index each item gets names the thread running it: one index per thread, the
// caller's 0, all below num_threads(); so scratch(worker) is that thread's alone.
TEST(ThreadPool, DynamicOnWorkersNamesTheRunningThread) {
  for (int spin : {5000, 0}) {
    ThreadPool pool(3, spin);
    const auto caller = std::this_thread::get_id();
    for (int j = 0; j < 100; ++j) {
      const int64_t n = 1 + (j * 37) % 101;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::thread::id> ids(static_cast<size_t>(n));
      std::vector<int> workers(static_cast<size_t>(n), -1);
      pool.parallel_for_dynamic_on_workers(n, [&](int worker, int64_t b, int64_t e) {
        ASSERT_EQ(e, b + 1);
        hits[static_cast<size_t>(b)].fetch_add(1);
        ids[static_cast<size_t>(b)] = std::this_thread::get_id();
        workers[static_cast<size_t>(b)] = worker;
        pool.scratch(worker).bytes(0, 64)[0] = static_cast<uint8_t>(b);  // a thread's own buffer
      });
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = static_cast<size_t>(i);
        ASSERT_EQ(hits[k].load(), 1) << "job " << j << " item " << i;
        ASSERT_TRUE(workers[k] >= 0 && workers[k] < pool.num_threads());
        EXPECT_EQ(workers[k] == 0, ids[k] == caller);
        for (size_t m = 0; m < k; ++m) EXPECT_EQ(workers[m] == workers[k], ids[m] == ids[k]);
      }
    }
  }
}

TEST(WorkerScratch, SlotsAreAlignedAndKeptAsTheyGrow) {
  WorkerScratch s;
  uint8_t* a = s.bytes(0, 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(s.bytes(0, 50), a);  // no smaller request moves it
  float* f = s.array<float>(1, 1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f) % 64, 0u);
  EXPECT_NE(static_cast<void*>(f), static_cast<void*>(a));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s.bytes(0, 1 << 20)) % 64, 0u);
}

// A thread that is held up takes fewer items: the others drain the queue meanwhile. With a
// static split each of the two threads would run 16 of the 32 items.
TEST(ThreadPool, DynamicBalancesAroundASlowThread) {
  ThreadPool pool(2, 5000);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> by_caller{0}, by_worker{0};
  std::atomic<bool> caller_slowed{false};
  pool.parallel_for_dynamic(32, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() == caller) {
      by_caller.fetch_add(1);
      if (!caller_slowed.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } else {
      by_worker.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  EXPECT_EQ(by_caller.load() + by_worker.load(), 32);
  EXPECT_GE(by_worker.load(), 24) << "the worker did not take over the slowed caller's share";
}

// parallel_for_elems covers every item once, in parts of at least kMinElemsPerThread elements
// (but the rounding of a part to whole items), the first part claimed the largest (to an item)
// and the last
// ones smaller; work too small for two threads runs as one call on the caller.
TEST(ThreadPool, ElemsCoverEveryItemOnceLargestPartsFirst) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads, 5000);
    for (auto [count, work] : {std::pair<int64_t, int64_t>{512, 1024}, {4096, 1}, {1000, 1000}, {100000, 7},
                               {3, 40000}, {10, 10}}) {
      std::mutex mu;
      std::vector<std::pair<int64_t, int64_t>> parts;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
      parallel_for_elems(&pool, count, work, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        parts.emplace_back(b, e);
      });
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << count << " x " << work;
      if (count * work < 2 * kMinElemsPerThread) {
        EXPECT_EQ(parts.size(), 1u) << count << " x " << work;
        continue;
      }
      std::sort(parts.begin(), parts.end());
      const int64_t first = parts.front().second - parts.front().first;
      const int64_t last = parts.back().second - parts.back().first;
      EXPECT_GE(static_cast<int64_t>(parts.size()), threads) << count << " x " << work;
      for (auto [b, e] : parts) EXPECT_GE((e - b + 1) * work, kMinElemsPerThread) << count << " x " << work;
      EXPECT_GE(first + 1, last) << count << " x " << work;  // one item of rounding
      // With four rounds of parts (weights 4, 2, 1, 1) the last is about a quarter of the first.
      if (count * work / (threads * 8) >= kMinElemsPerThread && count >= 8 * threads * 8) {
        EXPECT_LE(last * 3, first) << count << " x " << work;
      }
    }
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  const auto caller = std::this_thread::get_id();
  bool inline_run = false;
  pool.parallel_for(100, [&](int64_t b, int64_t e) { inline_run = b == 0 && e == 100 && std::this_thread::get_id() == caller; });
  EXPECT_TRUE(inline_run);
  EXPECT_EQ(pool.jobs(), 0u);
}

}  // namespace
}  // namespace densa
