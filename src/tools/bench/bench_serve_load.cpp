#include "tools/bench/bench_serve_load.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

namespace densa::bench {

using Clock = std::chrono::steady_clock;

std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed) {
  std::vector<double> t(std::max(0, n), 0.0);
  if (!(rate > 0) || std::isinf(rate)) return t;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  double now = 0;
  for (int i = 1; i < n; ++i) t[i] = now += gap(rng);
  return t;
}

namespace {

// Redraws "label [#####.....] done/total  elapsed" until stopped.
class ProgressBar {
 public:
  ProgressBar(std::string label, int total, bool enabled)
      : label_(std::move(label)), total_(total), enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0) {
    if (enabled_ && tty_) thread_ = std::thread([this] { loop(); });
  }
  ~ProgressBar() { finish(); }

  void tick() { done_.fetch_add(1); }

  void finish() {
    if (!enabled_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    draw(/*final=*/true);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopped_; })) draw(false);
  }

  void draw(bool final) {
    constexpr int kWidth = 30;
    const int done = done_.load();
    const int fill = total_ > 0 ? done * kWidth / total_ : kWidth;
    std::string bar(fill, '#');
    bar.resize(kWidth, '.');
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    std::fprintf(stderr, "%s%s [%s] %d/%d  %.1fs%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(), done,
                 total_, secs, final ? "\n" : "");
    std::fflush(stderr);
  }

  std::string label_;
  int total_;
  bool enabled_, tty_;
  Clock::time_point start_ = Clock::now();
  std::atomic<int> done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace

LevelRun run_level(const ClientOptions& client, std::span<const BenchPrompt> prompts, const LoadPlan& plan) {
  const int n = static_cast<int>(prompts.size());
  LevelRun run;
  run.records.resize(n);
  if (n == 0) return run;
  const std::vector<double> arrivals = poisson_arrivals(n, plan.request_rate, plan.seed);
  const int num_workers = std::clamp(plan.concurrency > 0 ? plan.concurrency : n, 1, std::min(n, 1024));
  std::atomic<int> next{0};
  ProgressBar bar(plan.label, n, plan.progress);
  const Clock::time_point epoch = Clock::now();
  std::vector<std::thread> workers;
  workers.reserve(num_workers);
  for (int w = 0; w < num_workers; ++w) {
    workers.emplace_back([&] {
      StreamingClient http(client);
      for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
        std::this_thread::sleep_until(epoch + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(arrivals[i])));
        run.records[i] = http.send(prompts[i], epoch);
        bar.tick();
      }
    });
  }
  for (std::thread& t : workers) t.join();
  bar.finish();
  for (const RequestRecord& r : run.records) run.duration_s = std::max(run.duration_s, r.start_s + r.e2e_s);
  return run;
}

}  // namespace densa::bench
