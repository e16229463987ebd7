// Engine end to end, in process, on the real MoE fixture (F16 GGUF): continuous batching
// equals one-at-a-time generation token for token, the prefix cache hits and changes nothing,
// a pool too small for the load preempts / queues and still completes everything, cancels
// free their pages, and the golden greedy continuations survive paged BF16 / F32 KV.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/engine_test_util.h"

namespace densa {
namespace {

using testing::Collected;
using testing::drain;
using testing::greedy_request;
using testing::moe_f16;
using testing::oracle;

std::unique_ptr<Engine> make_engine(const ModelWeights& w, EngineConfig c) {
  c.audit_every_step = true;
  auto e = Engine::create(w, c);
  CHECK(e.is_ok()) << e.status().to_string();
  return std::move(e).value();
}

// Idle engine: nothing referenced, every page free or cached, audit clean.
void expect_idle_clean(Engine& engine) {
  ASSERT_TRUE(engine.audit().is_ok());
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);
  EXPECT_EQ(s.kv_pages_used, 0);
}

std::vector<GenerateRequest> mixed_requests(int n, uint32_t seed) {
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  std::mt19937 rng(seed);
  std::vector<GenerateRequest> out;
  for (int i = 0; i < n; ++i) {
    const int len = std::uniform_int_distribution<int>(3, 120)(rng);
    const int max_new = std::uniform_int_distribution<int>(1, 40)(rng);
    const size_t off = std::uniform_int_distribution<size_t>(0, text.size() - 200)(rng);
    out.push_back(greedy_request(text, off, len, max_new));
  }
  return out;
}

std::vector<Collected> run_all(Engine& engine, const std::vector<GenerateRequest>& reqs) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateRequest& r : reqs) {
    auto s = engine.submit(r);
    CHECK(s.is_ok()) << s.status().to_string();
    streams.push_back(std::move(s).value());
  }
  std::vector<Collected> out;
  for (auto& s : streams) out.push_back(drain(*s));
  return out;
}

TEST(EngineTest, ConcurrentGreedyEqualsOneAtATime) {
  const ModelWeights& w = moe_f16();
  EngineConfig c;
  c.kv_dtype = DType::kBF16;
  c.chunked_prefill_size = 48;  // long prompts take several steps, mixed with decodes
  c.max_step_tokens = 256;
  auto engine = make_engine(w, c);
  const auto reqs = mixed_requests(64, 7);
  const auto got = run_all(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::vector<TokenId> want = oracle(w, reqs[i], DType::kBF16);
    EXPECT_EQ(got[i].tokens, want) << "request " << i << " prompt " << reqs[i].prompt.size();
    EXPECT_NE(got[i].finish, FinishReason::kAborted);
    EXPECT_EQ(got[i].events.back().num_prompt_tokens, static_cast<int32_t>(reqs[i].prompt.size()));
  }
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.requests_finished, 64);
  EXPECT_GT(s.steps, 0);
  expect_idle_clean(*engine);
}

TEST(EngineTest, SharedPrefixHitsCacheAndEqualsCold) {
  const ModelWeights& w = moe_f16();
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  EngineConfig c;
  c.kv_dtype = DType::kBF16;
  auto engine = make_engine(w, c);
  // A 100-token shared prefix, then distinct suffixes.
  const GenerateRequest first = greedy_request(text, 500, 100, 8);
  const auto warm = run_all(*engine, {first});
  EXPECT_EQ(warm[0].events.back().num_cached_tokens, 0);
  const int64_t hits_before = engine->stats().prefix_cache_hit_tokens;
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    GenerateRequest r = first;
    r.prompt.insert(r.prompt.end(), text.begin() + 2000 + 13 * i, text.begin() + 2000 + 13 * i + 5 + i);
    r.max_new_tokens = 20;
    reqs.push_back(r);
  }
  const auto got = run_all(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, oracle(w, reqs[i], DType::kBF16)) << "request " << i;
    EXPECT_EQ(got[i].events.front().num_cached_tokens, 96) << "request " << i;  // 6 full pages
  }
  EXPECT_GE(engine->stats().prefix_cache_hit_tokens - hits_before, 8 * 96);
  expect_idle_clean(*engine);
  EXPECT_GT(engine->stats().kv_pages_cached, 0);
}

TEST(EngineTest, CacheSaltKeepsTenantsApart) {
  const ModelWeights& w = moe_f16();
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  EngineConfig c;
  c.kv_dtype = DType::kBF16;
  auto engine = make_engine(w, c);
  GenerateRequest a = greedy_request(text, 700, 100, 6);
  a.cache_salt = "tenant-a";
  EXPECT_EQ(run_all(*engine, {a})[0].events.back().num_cached_tokens, 0);
  // The same prompt: another tenant and the shared namespace compute it cold; tenant A hits.
  GenerateRequest b = a;
  b.cache_salt = "tenant-b";
  GenerateRequest shared = a;
  shared.cache_salt.clear();
  const auto cold = run_all(*engine, {b});
  EXPECT_EQ(cold[0].events.front().num_cached_tokens, 0);
  EXPECT_EQ(run_all(*engine, {shared})[0].events.front().num_cached_tokens, 0);
  const auto hit = run_all(*engine, {a});
  EXPECT_EQ(hit[0].events.front().num_cached_tokens, 96);  // 6 full pages
  EXPECT_EQ(hit[0].tokens, cold[0].tokens);
  EXPECT_EQ(hit[0].tokens, oracle(w, a, DType::kBF16));
  // Now B's own pages are cached too.
  EXPECT_EQ(run_all(*engine, {b})[0].events.front().num_cached_tokens, 96);
  expect_idle_clean(*engine);
}

TEST(EngineTest, TinyPoolQueuesAndPreemptsAndCompletes) {
  const ModelWeights& w = moe_f16();
  EngineConfig c;
  c.kv_dtype = DType::kBF16;
  c.page_size = 16;
  const KvLayout l{4, 4, 16, 16, DType::kBF16};
  c.kv_cache_bytes = 12 * l.page_bytes();  // 192 tokens for all requests together
  c.chunked_prefill_size = 32;
  auto engine = make_engine(w, c);
  const auto reqs = mixed_requests(20, 11);
  const auto got = run_all(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, oracle(w, reqs[i], DType::kBF16)) << "request " << i;
  }
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.kv_pages_total, 12);
  EXPECT_GT(s.num_preemptions, 0);
  expect_idle_clean(*engine);
}

TEST(EngineTest, CancelMidwayFreesPages) {
  const ModelWeights& w = moe_f16();
  EngineConfig c;
  c.kv_dtype = DType::kBF16;
  const KvLayout l{4, 4, 16, 16, DType::kBF16};
  c.kv_cache_bytes = 12 * l.page_bytes();
  c.chunked_prefill_size = 32;
  auto engine = make_engine(w, c);
  auto reqs = mixed_requests(16, 23);
  for (auto& r : reqs) r.max_new_tokens = 40, r.ignore_eos = true;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine->submit(r).value());
  // Cancel every other request: some after their first token, some while still queued.
  std::vector<std::vector<TokenId>> taken(streams.size());  // the tokens read before a cancel
  for (size_t i = 0; i < streams.size(); i += 2) {
    if (i % 4 == 0) {
      const std::optional<TokenEvent> e = streams[i]->next(std::chrono::milliseconds(60000));
      ASSERT_TRUE(e && e->token && e->finish == FinishReason::kNone) << "request " << i;
      taken[i].push_back(*e->token);
    }
    engine->cancel(streams[i]->id());
  }
  // A cancel races the engine: on a loaded machine the test thread can be descheduled while a
  // request it is about to cancel runs to its end. Such a request must then be whole and right;
  // an aborted one holds a prefix of the right tokens. The last ones cancelled wait behind the
  // 12-page KV budget (three requests at a time), so some cancel always lands first.
  int aborted = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    Collected got = drain(*streams[i]);
    got.tokens.insert(got.tokens.begin(), taken[i].begin(), taken[i].end());
    const std::vector<TokenId> want = oracle(w, reqs[i], DType::kBF16);
    if (i % 2 == 0 && got.finish == FinishReason::kAborted) {
      ++aborted;
      ASSERT_LE(got.tokens.size(), want.size()) << "request " << i;
      EXPECT_EQ(got.tokens, std::vector<TokenId>(want.begin(), want.begin() + got.tokens.size())) << "request " << i;
    } else {
      EXPECT_EQ(got.finish, FinishReason::kLength) << "request " << i;
      EXPECT_EQ(got.tokens, want) << "request " << i;
    }
  }
  EXPECT_GE(aborted, 1);
  engine->cancel(streams[1]->id());  // finished: ignored
  expect_idle_clean(*engine);
}

TEST(EngineTest, StopTokensLogprobsAndValidation) {
  const ModelWeights& w = moe_f16();
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  auto engine = make_engine(w, EngineConfig{});
  GenerateRequest r = greedy_request(text, 100, 20, 30);
  r.ignore_eos = true;
  const std::vector<TokenId> want = oracle(w, r, DType::kBF16);
  ASSERT_GE(want.size(), 5u);
  r.stop_token_ids = {want[4]};
  r.num_top_logprobs = 3;
  const Collected got = run_all(*engine, {r})[0];
  const size_t stop_at = std::find(want.begin(), want.end(), want[4]) - want.begin();
  EXPECT_EQ(got.finish, FinishReason::kStop);
  EXPECT_EQ(got.tokens, std::vector<TokenId>(want.begin(), want.begin() + stop_at + 1));
  for (const TokenEvent& e : got.events) {
    ASSERT_EQ(e.top_logprobs.size(), 3u);
    EXPECT_EQ(e.top_logprobs[0].first, *e.token);  // greedy picks the most likely
    EXPECT_FLOAT_EQ(e.top_logprobs[0].second, e.logprob);
    EXPECT_LT(e.logprob, 0.0f);
  }
  // Length finish carries the last token.
  GenerateRequest shortr = greedy_request(text, 100, 20, 3);
  shortr.ignore_eos = true;
  const Collected s = run_all(*engine, {shortr})[0];
  EXPECT_EQ(s.tokens.size(), 3u);
  EXPECT_EQ(s.finish, FinishReason::kLength);
  EXPECT_TRUE(s.events.back().token.has_value());

  GenerateRequest bad;
  EXPECT_EQ(engine->submit(bad).status().code(), StatusCode::kInvalidArgument);
  bad = greedy_request(text, 0, 200, 100);  // 301 > context 256
  EXPECT_EQ(engine->submit(bad).status().code(), StatusCode::kOutOfRange);
  bad = greedy_request(text, 0, 10, 0);
  EXPECT_EQ(engine->submit(bad).status().code(), StatusCode::kInvalidArgument);
  bad = greedy_request(text, 0, 10, 5);
  bad.prompt[3] = 5000;
  EXPECT_EQ(engine->submit(bad).status().code(), StatusCode::kInvalidArgument);
  expect_idle_clean(*engine);
}

// The integrity seam: a tracker that rejects one sequence of one batch fails exactly that
// request with kError (its KV is never served again); the others are untouched.
class FailOnceTracker final : public IntegrityTracker {
 public:
  void verify(const PagePool&, std::span<const BlockTable* const> tables,
              std::span<Status> verdicts) override {
    ++calls;
    if (calls == 5 && !tables.empty()) verdicts[0] = Status(StatusCode::kAborted, "tag mismatch (test)");
  }
  int calls = 0;
};

TEST(EngineTest, IntegrityFailureFailsOnlyThatRequest) {
  const ModelWeights& w = moe_f16();
  FailOnceTracker tracker;
  EngineConfig c;
  c.integrity_tracker = &tracker;
  auto engine = make_engine(w, c);
  const auto reqs = mixed_requests(6, 5);
  const auto got = run_all(*engine, reqs);
  int num_errors = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (got[i].finish == FinishReason::kError) {
      ++num_errors;
      EXPECT_EQ(got[i].events.back().error.code(), StatusCode::kAborted);
      EXPECT_FALSE(got[i].events.back().token.has_value());
      continue;
    }
    EXPECT_EQ(got[i].tokens, oracle(w, reqs[i], DType::kBF16)) << "request " << i;
  }
  EXPECT_EQ(num_errors, 1);
  EXPECT_GE(tracker.calls, 5);
  expect_idle_clean(*engine);
}

TEST(EngineTest, PromptBeyondPoolIsRejected) {
  const ModelWeights& w = moe_f16();
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  EngineConfig c;
  const KvLayout l{4, 4, 16, 16, DType::kBF16};
  c.kv_cache_bytes = 4 * l.page_bytes();  // 64 tokens
  auto engine = make_engine(w, c);
  EXPECT_EQ(engine->submit(greedy_request(text, 0, 60, 10)).status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(engine->submit(greedy_request(text, 0, 40, 10)).is_ok());
  engine->shutdown();
  EXPECT_TRUE(engine->audit().is_ok());
  EXPECT_EQ(engine->submit(greedy_request(text, 0, 4, 1)).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace densa
