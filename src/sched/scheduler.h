#pragma once
// Scheduler: owns every live Request, the FCFS waiting queue and the running set, and decides
// each step's batch. One step is
//   plan = plan_step(pool, cache)   pure: reads state, decides preemptions, admissions,
//                                   page grants and chunks
//   apply(plan, pool, cache)        the one place page operations happen
//   (runner executes plan.chunks)
//   commit(plan, result, ...)       records tokens, finishes requests, feeds the prefix cache
// "Out of pages" is a plan outcome: requests wait, or the newest running ones are preempted
// (pages released, recomputed later from prompt + generated tokens). Nothing is dropped.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "kv/page_pool.h"
#include "kv/radix_cache.h"
#include "sched/request.h"
#include "sched/step_plan.h"

namespace densa {

struct SchedulerConfig {
  int32_t page_size = 16;
  int32_t max_running_requests = 64;
  int32_t chunked_prefill_size = 256;  // max tokens of one request per step
  int32_t max_step_tokens = 1024;      // token budget of one batch
  int32_t max_context_tokens = 2048;   // model context: a request never grows past it
  TokenId eos_token_id = 2;
  bool enable_prefix_cache = true;
};

// Counters since construction.
struct SchedulerCounters {
  int64_t prefix_cache_hit_tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t finished = 0;
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Queues a request at the back of the waiting queue.
  void add(std::unique_ptr<Request> request);

  StepPlan plan_step(const PagePool& pool, const RadixCache& cache) const;
  // Applies the plan's page operations: preemptions release, admissions retain their prefix,
  // grants allocate (evicting cached pages as needed). CHECKs that the plan fits.
  void apply(const StepPlan& plan, PagePool& pool, RadixCache& cache);
  // Records the step: advances computed tokens, appends sampled tokens, finishes requests
  // (stop / length / error) and releases their pages. Returns one update per chunk.
  std::vector<RequestUpdate> commit(const StepPlan& plan, const StepResult& result,
                                    PagePool& pool, RadixCache& cache);

  // Ends a request now (cancel / shutdown): releases its pages without caching its KV.
  // nullopt when the id is unknown.
  std::optional<RequestUpdate> abort(RequestId id, PagePool& pool, RadixCache& cache);
  std::vector<RequestUpdate> abort_all(PagePool& pool, RadixCache& cache);

  Request* find(RequestId id);
  const Request* find(RequestId id) const;
  // Block tables of requests that hold pages (for kv_audit).
  std::vector<const BlockTable*> live_tables() const;

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  // Prompt + generated tokens of every live request.
  int64_t num_live_tokens() const {
    int64_t n = 0;
    for (const auto& [id, r] : requests_) n += r->num_tokens();
    return n;
  }
  const SchedulerCounters& counters() const { return counters_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  // Drops a request: releases pages (after inserting its computed full pages into the cache
  // when cache_kv), removes it from the queues.
  void finish(Request& r, bool cache_kv, PagePool& pool, RadixCache& cache);
  void release_pages(Request& r, bool cache_kv, PagePool& pool, RadixCache& cache);
  // Evicts cached pages until `num_pages` are free. CHECKs success (the plan promised it).
  void ensure_free(int32_t num_pages, PagePool& pool, RadixCache& cache);
  std::optional<FinishReason> stop_condition(const Request& r) const;

  SchedulerConfig config_;
  std::map<RequestId, std::unique_ptr<Request>> requests_;
  std::deque<RequestId> waiting_;   // FCFS; preempted requests return to the front
  std::vector<RequestId> running_;  // admission order: oldest first, preempted from the back
  SchedulerCounters counters_;
};

}  // namespace densa
