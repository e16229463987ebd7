// StepObserver: one record per engine step in step order, with the batch's shape and the KV
// integrity check's time exactly on the steps that ran a check; an observer can switch the
// policy per step from the engine thread (what bench/integrity_overhead_bench.cpp does).
#include "engine/step_observer.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "engine/engine_test_util.h"

namespace densa {
namespace {

using testing::drain;
using testing::greedy_request;
using testing::moe_f16;

// Keeps every record; with `engine` set, turns tag checks on for even steps and off for odd ones.
class Recorder final : public StepObserver {
 public:
  void on_step(const StepRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(r);
    if (engine_ != nullptr) {
      const bool next_on = (r.step + 1) % 2 == 0;
      CHECK(engine_->set_kv_integrity({next_on ? KvIntegrityMode::kTags : KvIntegrityMode::kOff, 1, 1}).is_ok());
    }
  }
  std::vector<StepRecord> records() const {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }
  Engine* engine_ = nullptr;

 private:
  mutable std::mutex mu_;
  std::vector<StepRecord> records_;
};

constexpr int kPrompt = 40;  // BOS + 40 tokens: one prefill chunk
constexpr int kNew = 6;

std::vector<StepRecord> run_one(EngineConfig c, Recorder& rec, bool switch_per_step) {
  c.step_observer = &rec;
  c.audit_every_step = true;
  std::unique_ptr<Engine> engine = Engine::create(moe_f16(), c).value();
  if (switch_per_step) {
    rec.engine_ = engine.get();
    CHECK(engine->set_kv_integrity({KvIntegrityMode::kTags, 1, 1}).is_ok());  // step 0 is even
  }
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  auto stream = engine->submit(greedy_request(text, 0, kPrompt, kNew)).value();
  EXPECT_EQ(drain(*stream).tokens.size(), static_cast<size_t>(kNew));
  engine->shutdown();  // joins the engine thread: every on_step has returned
  return rec.records();
}

// One prefill step, then one decode step per further token; times ordered and non-overlapping.
void expect_shape(const std::vector<StepRecord>& rs) {
  ASSERT_EQ(rs.size(), static_cast<size_t>(kNew));
  for (size_t i = 0; i < rs.size(); ++i) {
    const StepRecord& r = rs[i];
    EXPECT_EQ(r.step, static_cast<int64_t>(i));
    EXPECT_EQ(r.num_seqs, 1);
    EXPECT_LE(r.begin, r.end);
    if (i > 0) {
      EXPECT_LE(rs[i - 1].end, r.begin);
    }
    if (i == 0) {
      EXPECT_EQ(r.num_decode_seqs, 0);
      EXPECT_EQ(r.num_tokens, kPrompt + 1);
      EXPECT_EQ(r.num_kv_tokens, kPrompt + 1);
    } else {
      EXPECT_EQ(r.num_decode_seqs, 1);
      EXPECT_EQ(r.num_tokens, 1);
      EXPECT_EQ(r.num_kv_tokens, kPrompt + 1 + static_cast<int64_t>(i));
    }
  }
}

TEST(StepObserver, TagModeTimesTheCheckOnEveryStepThatReadsCachedKv) {
  EngineConfig c;
  c.kv_integrity = KvIntegrityPolicy{KvIntegrityMode::kTags, 1, 1};
  Recorder rec;
  const std::vector<StepRecord> rs = run_one(c, rec, false);
  expect_shape(rs);
  ASSERT_FALSE(rs.empty());
  EXPECT_FALSE(rs[0].integrity_check_us.has_value()) << "a first prefill chunk reads no cached KV";
  for (size_t i = 1; i < rs.size(); ++i) {
    ASSERT_TRUE(rs[i].integrity_check_us.has_value()) << "step " << i;
    EXPECT_GE(*rs[i].integrity_check_us, 0.0);
    EXPECT_LE(*rs[i].integrity_check_us, rs[i].step_us());
  }
}

TEST(StepObserver, NoTrackerRecordsNoCheck) {
  Recorder rec;
  const std::vector<StepRecord> rs = run_one(EngineConfig{}, rec, false);
  expect_shape(rs);
  for (const StepRecord& r : rs) EXPECT_FALSE(r.integrity_check_us.has_value()) << "step " << r.step;
}

TEST(StepObserver, PolicySetFromTheObserverAppliesToTheNextStep) {
  EngineConfig c;
  c.kv_integrity = KvIntegrityPolicy{};
  Recorder rec;
  const std::vector<StepRecord> rs = run_one(c, rec, true);
  expect_shape(rs);
  for (size_t i = 1; i < rs.size(); ++i) {
    EXPECT_EQ(rs[i].integrity_check_us.has_value(), rs[i].step % 2 == 0) << "step " << rs[i].step;
  }
}

}  // namespace
}  // namespace densa
