// Scheduler::plan_step: the pure half of a step. It simulates page availability (free pages
// + evictable cached pages, adjusted for the plan's own preemptions and prefix retains) and
// decides, in order:
//   1. running requests, oldest first: each gets its next chunk (a decode is a chunk of 1)
//      within the token budget; when its pages do not fit, the newest running requests are
//      preempted (possibly itself) until they do;
//   2. if nothing was preempted, waiting requests in FCFS order while the running cap, the
//      token budget and the pages for their whole remaining prompt allow; the first that does
//      not fit stops admission (no overtaking).
#include <algorithm>
#include <unordered_map>

#include "sched/scheduler.h"

namespace densa {
namespace {

// Page availability as the plan would leave it.
class PageBudget {
 public:
  PageBudget(const PagePool& pool, const RadixCache& cache)
      : pool_(pool), avail_(pool.num_free() + cache.num_evictable(pool)) {}

  int32_t avail() const { return avail_; }
  void take(int32_t num_pages) {
    DCHECK(num_pages <= avail_) << "plan overdraws pages";
    avail_ -= num_pages;
  }
  // A request's pages are released: each whose simulated refcount drops to 0 becomes free
  // or cached (and so evictable).
  void release(const BlockTable& table) {
    for (PageId p : table.pages) {
      if (--delta_[p.value] + pool_.refcount(p) == 0) ++avail_;
    }
  }
  // Pages of a prefix match that are unreferenced now leave the evictable set when retained.
  int32_t retain_cost(const PrefixMatch& m) const {
    int32_t cost = 0;
    for (PageId p : m.pages) cost += refcount(p) == 0;
    return cost;
  }
  void retain(const PrefixMatch& m) {
    avail_ -= retain_cost(m);
    for (PageId p : m.pages) ++delta_[p.value];
  }

 private:
  int32_t refcount(PageId p) const {
    const auto it = delta_.find(p.value);
    return pool_.refcount(p) + (it == delta_.end() ? 0 : it->second);
  }

  const PagePool& pool_;
  int32_t avail_;
  std::unordered_map<int32_t, int32_t> delta_;  // PageId.value -> simulated refcount change
};

}  // namespace

StepPlan Scheduler::plan_step(const PagePool& pool, const RadixCache& cache) const {
  StepPlan plan;
  const int32_t P = config_.page_size;
  PageBudget pages(pool, cache);
  int32_t budget = config_.max_step_tokens;

  // 1. Running requests; victims come off the back of `running`.
  std::vector<RequestId> running = running_;
  for (size_t i = 0; i < running.size() && budget > 0;) {
    const Request& r = *find(running[i]);
    const int32_t n = std::min({r.num_pending(), config_.chunked_prefill_size, budget});
    DCHECK(n > 0) << "running request " << r.id << " has nothing to compute";
    const int32_t need = r.table.pages_missing(static_cast<int64_t>(r.num_computed_tokens) + n, P);
    bool preempted_self = false;
    while (need > pages.avail()) {
      const RequestId victim = running.back();
      running.pop_back();
      plan.preempt.push_back(victim);
      pages.release(find(victim)->table);
      if (victim == r.id) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;  // r was the newest left: nothing after it to schedule
    pages.take(need);
    budget -= n;
    if (need > 0) plan.grants.push_back({r.id, need});
    plan.chunks.push_back({r.id, r.num_computed_tokens, n, r.num_computed_tokens + n == r.num_tokens()});
    ++i;
  }
  if (!plan.preempt.empty()) return plan;

  // 2. Admissions, FCFS.
  int32_t num_running = static_cast<int32_t>(running.size());
  int32_t reserved = 0;  // pages admitted prompts will still need after this step
  for (RequestId id : waiting_) {
    if (num_running >= config_.max_running_requests || budget <= 0) break;
    const Request& r = *find(id);
    PrefixMatch prefix;
    const bool prefilled = r.prefilled();  // imported KV: its own pages, no prefix match
    if (config_.enable_prefix_cache && !prefilled) prefix = cache.match(r.tokens, r.num_tokens() - 1, r.params.cache_salt);
    const int32_t computed = prefilled ? r.num_computed_tokens : prefix.num_tokens;
    const int32_t n = std::min({r.num_tokens() - computed, config_.chunked_prefill_size, budget});
    const int32_t num_prefix_pages = prefilled ? r.table.num_pages() : static_cast<int32_t>(prefix.pages.size());
    const int32_t need_now =
        std::max(0, static_cast<int32_t>(pages_for_tokens(computed + n, P)) - num_prefix_pages);
    const int32_t need_all =
        std::max(0, static_cast<int32_t>(pages_for_tokens(r.num_tokens(), P)) - num_prefix_pages);
    if (pages.retain_cost(prefix) + need_all > pages.avail() - reserved) break;
    pages.retain(prefix);
    pages.take(need_now);
    reserved += need_all - need_now;
    budget -= n;
    ++num_running;
    if (need_now > 0) plan.grants.push_back({r.id, need_now});
    plan.chunks.push_back({r.id, computed, n, computed + n == r.num_tokens()});
    plan.admit.push_back({r.id, std::move(prefix)});
  }
  return plan;
}

}  // namespace densa
