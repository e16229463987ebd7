// KV integrity end to end on the MoE fixture: for every fault kind, 16 concurrent greedy
// requests run once fault-free, once with the fault and the check on, once with the fault and
// the check off. With the check on, every victim ends with a kv_integrity_violation error
// having emitted only tokens equal to the fault-free ones, every other request equals the
// fault-free run, the counter moves, and the pool audits clean afterwards. With the check off
// the same fault visibly changes some output (so this test can fail).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "exec/kv_integrity.h"

namespace densa {
namespace {

using testing::Collected;
using testing::drain;
using testing::greedy_request;
using testing::moe_f16;

constexpr int kNumRequests = 16;

std::vector<GenerateRequest> load() {
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  std::mt19937 rng(17);
  std::vector<GenerateRequest> out;
  for (int i = 0; i < kNumRequests; ++i) {
    const int len = std::uniform_int_distribution<int>(10, 40)(rng);
    const size_t off = std::uniform_int_distribution<size_t>(0, text.size() - 100)(rng);
    GenerateRequest r = greedy_request(text, off, len, 12);
    r.ignore_eos = true;
    out.push_back(std::move(r));
  }
  return out;
}

EngineConfig base_config() {
  EngineConfig c;
  c.kv_dtype = DType::kBF16;
  c.page_size = 8;
  c.chunked_prefill_size = 24;
  c.max_step_tokens = 160;
  c.num_threads = 2;
  return c;
}

struct EngineRun {
  std::vector<RequestId> ids;
  std::vector<Collected> out;
  EngineStats stats;
  Status audit;
};

EngineRun run_load(EngineConfig c, const std::vector<GenerateRequest>& reqs) {
  auto created = Engine::create(moe_f16(), c);
  CHECK(created.is_ok()) << created.status().to_string();
  std::unique_ptr<Engine> engine = std::move(created).value();
  EngineRun r;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateRequest& g : reqs) {
    streams.push_back(engine->submit(g).value());
    r.ids.push_back(streams.back()->id());
  }
  for (auto& s : streams) r.out.push_back(drain(*s));
  r.stats = engine->stats();
  r.audit = engine->audit();
  return r;
}

const std::vector<std::vector<TokenId>>& fault_free() {
  static const auto* tokens = [] {
    const std::vector<GenerateRequest> reqs = load();
    const EngineRun r = run_load(base_config(), reqs);
    auto* out = new std::vector<std::vector<TokenId>>;
    for (const Collected& c : r.out) out->push_back(c.tokens);
    return out;
  }();
  return *tokens;
}

bool is_prefix(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

class IntegrityFaultTest : public ::testing::TestWithParam<KvFault> {};

TEST_P(IntegrityFaultTest, CheckOnFailsOnlyVictimsCheckOffCorrupts) {
  const KvFault fault = GetParam();
  const std::vector<GenerateRequest> reqs = load();
  const auto& want = fault_free();
  for (size_t i = 0; i < reqs.size(); ++i) ASSERT_EQ(want[i].size(), 12u) << "request " << i;
  const KvIntegrityMode mode = fault == KvFault::kBitFlip ? KvIntegrityMode::kDigest : KvIntegrityMode::kTags;

  // Check on.
  {
    FaultInjector injector(fault, 4);
    EngineConfig c = base_config();
    c.kv_integrity = KvIntegrityPolicy{mode, 1, 1};
    c.fault_injector = &injector;
    const EngineRun r = run_load(c, reqs);
    ASSERT_TRUE(injector.fired());
    const std::vector<uint64_t> victims = injector.victims();
    ASSERT_FALSE(victims.empty());
    const std::set<uint64_t> victim_set(victims.begin(), victims.end());
    int num_errors = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const Collected& got = r.out[i];
      EXPECT_TRUE(is_prefix(got.tokens, want[i])) << "request " << i << " emitted a token from a wrong page";
      if (victim_set.count(r.ids[i].value)) {
        ++num_errors;
        ASSERT_EQ(got.finish, FinishReason::kError) << "victim " << i;
        const Status& e = got.events.back().error;
        EXPECT_TRUE(is_kv_integrity_violation(e)) << e.to_string();
        EXPECT_EQ(e.code(), mode == KvIntegrityMode::kDigest ? StatusCode::kDataLoss : StatusCode::kAborted);
        EXPECT_NE(e.message().find("request " + std::to_string(r.ids[i].value)), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("page history"), std::string::npos) << e.message();
        EXPECT_LT(got.tokens.size(), want[i].size());
      } else {
        EXPECT_EQ(got.tokens, want[i]) << "unaffected request " << i;
        EXPECT_EQ(got.finish, FinishReason::kLength) << "unaffected request " << i;
      }
    }
    EXPECT_EQ(num_errors, static_cast<int>(victim_set.size()));
    EXPECT_EQ(r.stats.kv_integrity_violations, num_errors);
    EXPECT_TRUE(r.audit.is_ok()) << r.audit.to_string();
  }

  // Check off: the same fault is not caught and changes what somebody reads.
  {
    FaultInjector injector(fault, 4);
    EngineConfig c = base_config();
    c.fault_injector = &injector;
    const EngineRun r = run_load(c, reqs);
    ASSERT_TRUE(injector.fired());
    int num_differ = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_NE(r.out[i].finish, FinishReason::kError);
      num_differ += r.out[i].tokens != want[i] ? 1 : 0;
    }
    EXPECT_GE(num_differ, 1) << kv_fault_name(fault) << " left every output intact with the check off";
    EXPECT_EQ(r.stats.kv_integrity_violations, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllFaults, IntegrityFaultTest, ::testing::ValuesIn(kAllKvFaults),
                         [](const ::testing::TestParamInfo<KvFault>& info) {
                           std::string name = kv_fault_name(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Bit flips leave tags intact: the tag mode alone misses them (which is why digest exists).
TEST(IntegrityFaultEngine, BitFlipNeedsDigestMode) {
  const std::vector<GenerateRequest> reqs = load();
  FaultInjector injector(KvFault::kBitFlip, 4);
  EngineConfig c = base_config();
  c.kv_integrity = KvIntegrityPolicy{KvIntegrityMode::kTags, 1, 1};
  c.fault_injector = &injector;
  const EngineRun r = run_load(c, reqs);
  ASSERT_TRUE(injector.fired());
  EXPECT_EQ(r.stats.kv_integrity_violations, 0);
}

// Switching: an engine started with the check off catches nothing until a request opts in or
// the policy is switched on at run time.
TEST(IntegrityFaultEngine, PerRequestOverrideAndRuntimeSwitch) {
  std::vector<GenerateRequest> reqs = load();
  const auto& want = fault_free();
  for (GenerateRequest& g : reqs) g.kv_integrity = true;
  {
    FaultInjector injector(KvFault::kPageReuse, 4);
    EngineConfig c = base_config();
    c.kv_integrity = KvIntegrityPolicy{};  // off, switchable
    c.fault_injector = &injector;
    const EngineRun r = run_load(c, reqs);
    ASSERT_TRUE(injector.fired());
    EXPECT_EQ(r.stats.kv_integrity_violations, 1);
  }
  {
    auto engine = Engine::create(moe_f16(), [] {
                    EngineConfig c = base_config();
                    c.kv_integrity = KvIntegrityPolicy{};
                    return c;
                  }()).value();
    ASSERT_TRUE(engine->kv_integrity().has_value());
    EXPECT_EQ(engine->kv_integrity()->mode, KvIntegrityMode::kOff);
    const KvIntegrityPolicy on{KvIntegrityMode::kTags, 2, 1};
    EXPECT_TRUE(engine->set_kv_integrity(on).is_ok());
    EXPECT_EQ(*engine->kv_integrity(), on);
    // Correct output with the check on (no false positives).
    std::vector<std::shared_ptr<RequestStream>> streams;
    const std::vector<GenerateRequest> plain = load();
    for (const GenerateRequest& g : plain) streams.push_back(engine->submit(g).value());
    for (size_t i = 0; i < streams.size(); ++i) EXPECT_EQ(drain(*streams[i]).tokens, want[i]);
    EXPECT_EQ(engine->stats().kv_integrity_violations, 0);
  }
  auto fixed = Engine::create(moe_f16(), base_config()).value();  // NoopTracker: not switchable
  EXPECT_FALSE(fixed->kv_integrity().has_value());
  EXPECT_EQ(fixed->set_kv_integrity({KvIntegrityMode::kTags, 1, 1}).code(), StatusCode::kUnimplemented);
}

// Faults asked for by the requests themselves (GenerateRequest::inject_fault, what
// `densa serve --test-allow-fault-injection` and bench/soak.sh use): of 16 concurrent greedy
// requests, two ask for the fault. Each of the two that it fired on fails with a violation
// naming it, having emitted only fault-free tokens; every other request equals the fault-free
// run; the pool audits clean.
class RequestFaultTest : public ::testing::TestWithParam<KvFault> {};

TEST_P(RequestFaultTest, OnlyTheAskingRequestsFail) {
  const KvFault fault = GetParam();
  std::vector<GenerateRequest> reqs = load();
  const auto& want = fault_free();
  const std::set<size_t> asking = {3, 11};
  for (size_t i : asking) reqs[i].inject_fault = fault;
  EngineConfig c = base_config();
  const KvIntegrityMode mode = fault == KvFault::kBitFlip ? KvIntegrityMode::kDigest : KvIntegrityMode::kTags;
  c.kv_integrity = KvIntegrityPolicy{mode, 1, 1};
  const EngineRun r = run_load(c, reqs);
  int num_errors = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Collected& got = r.out[i];
    EXPECT_TRUE(is_prefix(got.tokens, want[i])) << "request " << i << " emitted a token from a wrong page";
    if (asking.count(i) == 0) {
      EXPECT_EQ(got.tokens, want[i]) << "unaffected request " << i;
      EXPECT_EQ(got.finish, FinishReason::kLength) << "unaffected request " << i;
      continue;
    }
    // Every fault kind fits these requests (prompts of 10-40 tokens on 8-token pages, 12
    // generated, 15 others in the batch), so each asking request is a victim.
    ASSERT_EQ(got.finish, FinishReason::kError) << "asking request " << i << " (" << kv_fault_name(fault) << ")";
    const Status& e = got.events.back().error;
    EXPECT_TRUE(is_kv_integrity_violation(e)) << e.to_string();
    EXPECT_NE(e.message().find("request " + std::to_string(r.ids[i].value)), std::string::npos) << e.message();
    ++num_errors;
  }
  EXPECT_EQ(num_errors, 2);
  EXPECT_EQ(r.stats.kv_integrity_violations, 2);
  EXPECT_TRUE(r.audit.is_ok()) << r.audit.to_string();
}

INSTANTIATE_TEST_SUITE_P(AllFaults, RequestFaultTest, ::testing::ValuesIn(kAllKvFaults),
                         [](const ::testing::TestParamInfo<KvFault>& info) {
                           std::string name = kv_fault_name(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace densa
