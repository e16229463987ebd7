// Scheduler without a model: plan_step is pure, chunked prefill respects the token budget and
// mixes with decodes, admission is FCFS under the running cap, pages running out preempts the
// newest request and never drops one, and a randomized load with a fake runner keeps kv_audit
// clean after every step and ends with every page free or cached.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <random>

#include "kv/kv_audit.h"

namespace densa {
namespace {

constexpr int32_t kPage = 4;

PagePool make_pool(int32_t num_pages) {
  KvLayout l;
  l.num_layers = 1;
  l.num_kv_heads = 1;
  l.head_dim = 8;
  l.page_size = kPage;
  Result<PagePool> pool = PagePool::create(l, num_pages * l.page_bytes());
  CHECK(pool.is_ok());
  return std::move(pool).value();
}

SchedulerConfig config() {
  SchedulerConfig c;
  c.page_size = kPage;
  c.max_running_requests = 4;
  c.chunked_prefill_size = 8;
  c.max_step_tokens = 16;
  c.max_context_tokens = 256;
  c.eos_token_id = 2;
  return c;
}

std::unique_ptr<Request> request(uint64_t id, std::vector<TokenId> prompt, int max_new) {
  RequestParams p;
  p.sampling.temperature = 0.0f;
  p.max_new_tokens = max_new;
  return std::make_unique<Request>(RequestId(id), std::move(prompt), p);
}

// A deterministic stand-in for the model: the next token is a function of the request's
// tokens so far (never eos).
TokenId fake_next(const Request& r) {
  uint32_t h = 17;
  for (TokenId t : r.tokens) h = h * 31 + static_cast<uint32_t>(t);
  return static_cast<TokenId>(3 + h % 5);
}

StepResult fake_run(const StepPlan& plan, Scheduler& s) {
  StepResult res;
  for (const ScheduledChunk& c : plan.chunks) {
    ChunkOutcome o;
    if (c.sample) o.sampled = SampledToken{fake_next(*s.find(c.id)), 0.0f, {}};
    res.outcomes.push_back(std::move(o));
  }
  return res;
}

Status audit(const Scheduler& s, const PagePool& pool, const RadixCache& cache) {
  const auto tables = s.live_tables();
  const auto held = cache.pages();
  DENSA_RETURN_IF_ERROR(kv_audit(pool, tables, held));
  return cache.audit(pool);
}

TEST(SchedulerTest, PlanIsPureAndChunksWithinBudget) {
  PagePool pool = make_pool(64);
  RadixCache cache(kPage);
  Scheduler s(config());
  s.add(request(1, std::vector<TokenId>(20, 5), 4));
  s.add(request(2, std::vector<TokenId>(3, 6), 4));
  const StepPlan a = s.plan_step(pool, cache);
  const StepPlan b = s.plan_step(pool, cache);
  EXPECT_EQ(a.chunks.size(), b.chunks.size());
  EXPECT_EQ(pool.num_free(), 64);
  EXPECT_EQ(s.num_waiting(), 2);
  ASSERT_EQ(a.chunks.size(), 2u);
  EXPECT_EQ(a.chunks[0].num_tokens, 8);  // chunked_prefill_size
  EXPECT_FALSE(a.chunks[0].sample);
  EXPECT_EQ(a.chunks[1].num_tokens, 3);
  EXPECT_TRUE(a.chunks[1].sample);
  EXPECT_LE(a.num_tokens(), 16);

  s.apply(a, pool, cache);
  EXPECT_EQ(pool.num_used(), 2 + 1);
  s.commit(a, fake_run(a, s), pool, cache);
  // Next step: request 1 continues its prefill while request 2 decodes, in one batch.
  const StepPlan c = s.plan_step(pool, cache);
  ASSERT_EQ(c.chunks.size(), 2u);
  EXPECT_EQ(c.chunks[0].begin, 8);
  EXPECT_EQ(c.chunks[1].num_tokens, 1);
  ASSERT_TRUE(audit(s, pool, cache).is_ok());
}

TEST(SchedulerTest, RunningCapIsFcfs) {
  PagePool pool = make_pool(64);
  RadixCache cache(kPage);
  SchedulerConfig cfg = config();
  cfg.max_running_requests = 2;
  Scheduler s(cfg);
  for (uint64_t id = 1; id <= 4; ++id) s.add(request(id, {1, 5, 6}, 3));
  const StepPlan p = s.plan_step(pool, cache);
  ASSERT_EQ(p.admit.size(), 2u);
  EXPECT_EQ(p.admit[0].id, RequestId(1));
  EXPECT_EQ(p.admit[1].id, RequestId(2));
}

TEST(SchedulerTest, OutOfPagesPreemptsNewestAndRecomputes) {
  PagePool pool = make_pool(6);
  RadixCache cache(kPage);
  SchedulerConfig cfg = config();
  cfg.enable_prefix_cache = false;
  Scheduler s(cfg);
  s.add(request(1, {1, 5, 6, 7}, 12));  // grows to 16 tokens = 4 pages
  s.add(request(2, {1, 8, 9, 7}, 12));
  int steps = 0;
  std::map<RequestId, std::vector<TokenId>> out;
  int64_t preemptions_seen = 0;
  while (!s.idle() && steps < 200) {
    const StepPlan p = s.plan_step(pool, cache);
    preemptions_seen += static_cast<int64_t>(p.preempt.size());
    s.apply(p, pool, cache);
    for (const RequestUpdate& u : s.commit(p, fake_run(p, s), pool, cache)) {
      if (u.sampled) out[u.id].push_back(u.sampled->token);
    }
    ASSERT_TRUE(audit(s, pool, cache).is_ok()) << "step " << steps;
    ++steps;
  }
  EXPECT_TRUE(s.idle());
  EXPECT_GT(preemptions_seen, 0);
  EXPECT_EQ(s.counters().preemptions, preemptions_seen);
  EXPECT_EQ(out[RequestId(1)].size(), 12u);
  EXPECT_EQ(out[RequestId(2)].size(), 12u);
  EXPECT_EQ(pool.num_free(), 6);
}

TEST(SchedulerTest, RandomizedLoadKeepsAuditClean) {
  std::mt19937 rng(99);
  PagePool pool = make_pool(20);
  RadixCache cache(kPage);
  Scheduler s(config());
  uint64_t next = 1;
  std::map<RequestId, std::vector<TokenId>> prompts, out;
  std::map<RequestId, int> max_new;
  int finished = 0, aborted = 0;
  for (int step = 0; step < 3000 && (step < 2000 || !s.idle()); ++step) {
    if (step < 2000 && std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
      const int len = std::uniform_int_distribution<int>(1, 30)(rng);
      std::vector<TokenId> prompt(len);
      for (TokenId& t : prompt) t = std::uniform_int_distribution<int>(3, 4)(rng);  // shared prefixes
      const int mn = std::uniform_int_distribution<int>(1, 20)(rng);
      prompts[RequestId(next)] = prompt;
      max_new[RequestId(next)] = mn;
      s.add(request(next++, prompt, mn));
    }
    if (std::uniform_int_distribution<int>(0, 30)(rng) == 0 && next > 1) {
      const RequestId victim(std::uniform_int_distribution<uint64_t>(1, next - 1)(rng));
      if (s.abort(victim, pool, cache)) {
        ++aborted;
        out.erase(victim);
      }
    }
    const StepPlan p = s.plan_step(pool, cache);
    s.apply(p, pool, cache);
    for (const RequestUpdate& u : s.commit(p, fake_run(p, s), pool, cache)) {
      if (u.sampled) out[u.id].push_back(u.sampled->token);
      if (u.finish != FinishReason::kNone) {
        ++finished;
        EXPECT_EQ(u.finish, FinishReason::kLength);
        EXPECT_EQ(static_cast<int>(out[u.id].size()), max_new[u.id]);
      }
    }
    const Status a = audit(s, pool, cache);
    ASSERT_TRUE(a.is_ok()) << "step " << step << ": " << a.to_string();
  }
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(finished + aborted, static_cast<int>(next - 1));
  EXPECT_GT(s.counters().prefix_cache_hit_tokens, 0);
  EXPECT_EQ(pool.num_used(), 0);
  EXPECT_EQ(pool.num_free() + pool.num_cached(), pool.num_total());
}

}  // namespace
}  // namespace densa
