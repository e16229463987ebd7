// Scheduler state changes: apply (the one place page operations happen), commit, abort.
// plan_step lives in scheduler_plan.cpp.
#include "sched/scheduler.h"

#include <algorithm>

namespace densa {

Scheduler::Scheduler(const SchedulerConfig& config) : config_(config) {
  CHECK(config.page_size > 0 && config.max_running_requests > 0 && config.chunked_prefill_size > 0 &&
        config.max_step_tokens > 0)
      << "scheduler config needs positive sizes";
}

void Scheduler::add(std::unique_ptr<Request> request) {
  CHECK(request && !request->tokens.empty()) << "empty request";
  CHECK(request->num_computed_tokens < request->num_tokens() &&
        request->table.num_tokens == request->num_computed_tokens &&
        request->table.capacity_tokens(config_.page_size) >= request->num_computed_tokens)
      << "request " << request->id << " added with inconsistent prefilled KV";
  const RequestId id = request->id;
  request->state = RequestState::kWaiting;
  const bool inserted = requests_.emplace(id, std::move(request)).second;
  CHECK(inserted) << "duplicate request id " << id;
  waiting_.push_back(id);
}

Request* Scheduler::find(RequestId id) {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

const Request* Scheduler::find(RequestId id) const {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

std::vector<const BlockTable*> Scheduler::live_tables() const {
  std::vector<const BlockTable*> out;
  for (const auto& [id, r] : requests_) {
    if (r->table.num_pages() > 0) out.push_back(&r->table);
  }
  return out;
}

void Scheduler::ensure_free(int32_t num_pages, PagePool& pool, RadixCache& cache) {
  if (pool.num_free() < num_pages) cache.evict(num_pages - pool.num_free(), pool);
  CHECK(pool.num_free() >= num_pages)
      << "plan promised " << num_pages << " pages but only " << pool.num_free() << " are free";
}

void Scheduler::release_pages(Request& r, bool cache_kv, PagePool& pool, RadixCache& cache) {
  if (cache_kv && config_.enable_prefix_cache) cache.insert(r.tokens, r.table, pool, r.params.cache_salt);
  pool.release_all(r.table.pages);
  r.table.clear();
  r.num_computed_tokens = 0;
}

void Scheduler::apply(const StepPlan& plan, PagePool& pool, RadixCache& cache) {
  // Preemptions, newest first: each goes to the waiting front, so the oldest ends up first.
  for (RequestId id : plan.preempt) {
    Request& r = *find(id);
    CHECK(r.state == RequestState::kRunning) << "preempt of non-running request " << id;
    release_pages(r, /*cache_kv=*/true, pool, cache);  // its KV is valid: recompute may hit it
    r.state = RequestState::kWaiting;
    ++r.num_preemptions;
    ++counters_.preemptions;
    running_.erase(std::find(running_.begin(), running_.end(), id));
    waiting_.push_front(id);
  }
  for (const Admission& a : plan.admit) {
    CHECK(!waiting_.empty() && waiting_.front() == a.id) << "admission out of FCFS order: " << a.id;
    Request& r = *find(a.id);
    waiting_.pop_front();
    if (r.prefilled()) {
      // Imported KV: its pages are already in the table; the plan matched no prefix.
      CHECK(a.prefix.pages.empty()) << "prefilled request " << a.id << " with a prefix match";
    } else {
      pool.retain_all(a.prefix.pages);
      for (size_t k = 0; k < a.prefix.pages.size(); ++k) {
        CHECK(pool.tag(a.prefix.pages[k]) == a.prefix.tags[k]) << "cached page changed under the plan";
        r.table.append(a.prefix.pages[k], a.prefix.tags[k]);
      }
      r.table.num_tokens = r.num_computed_tokens = a.prefix.num_tokens;
      cache.touch(a.prefix);
    }
    if (!r.admitted_once) {
      r.admitted_once = true;
      r.num_cached_tokens = a.prefix.num_tokens;
      counters_.prompt_tokens += r.num_prompt_tokens;
    }
    counters_.prefix_cache_hit_tokens += a.prefix.num_tokens;
    r.state = RequestState::kRunning;
    running_.push_back(a.id);
  }
  for (const PageGrant& g : plan.grants) {
    Request& r = *find(g.id);
    ensure_free(g.num_pages, pool, cache);
    CHECK(pool.allocate_into(g.num_pages, r.table)) << "allocate_into failed after eviction";
  }
}

std::optional<FinishReason> Scheduler::stop_condition(const Request& r) const {
  const TokenId last = r.tokens.back();
  if (!r.params.ignore_eos && last == config_.eos_token_id) return FinishReason::kStop;
  const auto& stops = r.params.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), last) != stops.end()) return FinishReason::kStop;
  if (r.num_generated() >= r.params.max_new_tokens) return FinishReason::kLength;
  if (r.num_tokens() >= config_.max_context_tokens) return FinishReason::kLength;
  return std::nullopt;
}

void Scheduler::finish(Request& r, bool cache_kv, PagePool& pool, RadixCache& cache) {
  const RequestId id = r.id;
  release_pages(r, cache_kv, pool, cache);
  if (r.state == RequestState::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
  } else if (r.state == RequestState::kWaiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
  }
  r.state = RequestState::kFinished;
  ++counters_.finished;
  requests_.erase(id);
}

std::vector<RequestUpdate> Scheduler::commit(const StepPlan& plan, const StepResult& result,
                                             PagePool& pool, RadixCache& cache) {
  CHECK(result.outcomes.size() == plan.chunks.size()) << "step result does not match the plan";
  const int32_t P = config_.page_size;
  std::vector<RequestUpdate> updates;
  for (size_t k = 0; k < plan.chunks.size(); ++k) {
    const ScheduledChunk& c = plan.chunks[k];
    const ChunkOutcome& out = result.outcomes[k];
    Request& r = *find(c.id);
    CHECK(r.state == RequestState::kRunning && r.num_computed_tokens == c.begin)
        << "chunk of request " << c.id << " does not continue its state";
    RequestUpdate u{c.id, std::nullopt, FinishReason::kNone, Status::ok(), r.num_prompt_tokens,
                    r.num_cached_tokens};
    if (!out.error.is_ok()) {
      // Its KV is suspect: serve none of it again.
      cache.erase(r.table.pages, pool);
      u.finish = FinishReason::kError;
      u.error = out.error;
      finish(r, /*cache_kv=*/false, pool, cache);
      updates.push_back(std::move(u));
      continue;
    }
    const int32_t before = r.num_computed_tokens;
    r.num_computed_tokens += c.num_tokens;
    r.table.num_tokens = r.num_computed_tokens;
    if (config_.enable_prefix_cache && before / P != r.num_computed_tokens / P) {
      cache.insert(r.tokens, r.table, pool, r.params.cache_salt);  // newly full pages become shareable
    }
    if (!c.sample) continue;
    CHECK(out.sampled.has_value()) << "sampling chunk without a token";
    r.tokens.push_back(out.sampled->token);
    ++counters_.generated_tokens;
    u.sampled = out.sampled;
    if (const std::optional<FinishReason> cause = stop_condition(r)) {
      u.finish = *cause;
      if (r.params.export_kv) {
        pool.retain_all(r.table.pages);
        u.exported = r.table;
      }
      finish(r, /*cache_kv=*/true, pool, cache);
    }
    updates.push_back(std::move(u));
  }
  return updates;
}

std::optional<RequestUpdate> Scheduler::abort(RequestId id, PagePool& pool, RadixCache& cache) {
  Request* r = find(id);
  if (r == nullptr) return std::nullopt;
  RequestUpdate u{id, std::nullopt, FinishReason::kAborted, Status::ok(), r->num_prompt_tokens,
                  r->num_cached_tokens};
  finish(*r, /*cache_kv=*/false, pool, cache);
  return u;
}

std::vector<RequestUpdate> Scheduler::abort_all(PagePool& pool, RadixCache& cache) {
  std::vector<RequestId> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  std::vector<RequestUpdate> out;
  for (RequestId id : ids) out.push_back(*abort(id, pool, cache));
  return out;
}

}  // namespace densa
