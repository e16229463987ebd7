// Constrained sampling through the engine (sample/token_constraint.h): a request samples only
// tokens its constraint allows, the constraint sees every sampled token, the output does not
// depend on the batch it ran in, and a constraint that allows nothing fails the request
// instead of sampling from nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace densa {
namespace {

using testing::Collected;
using testing::drain;
using testing::greedy_request;
using testing::moe_f16;

// Allows, at generated position i, a set of `width` tokens drawn from a generator seeded by
// (seed, i): the allowed sets depend only on the position, like a grammar's on the tokens.
class ScriptedConstraint : public TokenConstraint {
 public:
  ScriptedConstraint(uint32_t seed, int width, int vocab, int empty_at = -1, int eos_at = -1, TokenId eos = 2)
      : seed_(seed), width_(width), vocab_(vocab), empty_at_(empty_at), eos_at_(eos_at), eos_(eos) {}

  std::vector<TokenId> allowed_at(int i) const {
    if (i == empty_at_) return {};
    if (i == eos_at_) return {eos_};
    std::mt19937 rng(seed_ * 7919u + static_cast<uint32_t>(i));
    std::vector<TokenId> out;
    while (static_cast<int>(out.size()) < width_) {
      // Skip the low ids (BOS / EOS / specials) so only the scripted step ends the request.
      const TokenId t = std::uniform_int_distribution<TokenId>(3, vocab_ - 1)(rng);
      if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    }
    return out;
  }
  void fill_allowed(std::span<uint64_t> mask) override {
    ++fills;
    for (TokenId t : allowed_at(position_)) mask[t / 64] |= uint64_t{1} << (t % 64);
  }
  Status accept(TokenId token) override {
    const std::vector<TokenId> a = allowed_at(position_);
    if (std::find(a.begin(), a.end(), token) == a.end())
      return invalid_argument("token " + std::to_string(token) + " not allowed at " + std::to_string(position_));
    accepted.push_back(token);
    ++position_;
    return Status::ok();
  }

  int fills = 0;
  std::vector<TokenId> accepted;

 private:
  uint32_t seed_;
  int width_, vocab_, empty_at_, eos_at_;
  TokenId eos_;
  int position_ = 0;
};

std::unique_ptr<Engine> make_engine(const ModelWeights& w) {
  EngineConfig c;
  c.audit_every_step = true;
  c.chunked_prefill_size = 32;
  auto e = Engine::create(w, c);
  CHECK(e.is_ok()) << e.status().to_string();
  return std::move(e).value();
}

GenerateRequest sampled_request(const std::vector<int32_t>& text, size_t offset, int len, int max_new, uint64_t seed) {
  GenerateRequest r = greedy_request(text, offset, len, max_new);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  return r;
}

TEST(ConstraintTest, SamplesOnlyAllowedTokensAndFeedsEveryOneBack) {
  const ModelWeights& w = moe_f16();
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  auto engine = make_engine(w);
  GenerateRequest r = sampled_request(text, 100, 20, 24, 11);
  auto c = std::make_shared<ScriptedConstraint>(5, 4, w.config.vocab_size);
  r.constraint = c;
  auto s = engine->submit(r);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const Collected got = drain(*s.value());
  ASSERT_EQ(got.tokens.size(), 24u);
  EXPECT_EQ(got.finish, FinishReason::kLength);
  EXPECT_EQ(c->accepted, got.tokens);
  EXPECT_EQ(c->fills, 24);
  for (size_t i = 0; i < got.tokens.size(); ++i) {
    const std::vector<TokenId> a = c->allowed_at(static_cast<int>(i));
    EXPECT_NE(std::find(a.begin(), a.end(), got.tokens[i]), a.end()) << "position " << i;
  }
  // Without the constraint the same seed samples other tokens: the mask did something.
  r.constraint = nullptr;
  auto free_stream = engine->submit(r);
  ASSERT_TRUE(free_stream.is_ok());
  EXPECT_NE(drain(*free_stream.value()).tokens, got.tokens);
}

TEST(ConstraintTest, OutputDoesNotDependOnTheBatch) {
  const ModelWeights& w = moe_f16();
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  auto alone_engine = make_engine(w);
  GenerateRequest probe = sampled_request(text, 300, 37, 20, 99);
  probe.constraint = std::make_shared<ScriptedConstraint>(8, 16, w.config.vocab_size);
  auto alone = alone_engine->submit(probe);
  ASSERT_TRUE(alone.is_ok());
  const std::vector<TokenId> want = drain(*alone.value()).tokens;
  ASSERT_EQ(want.size(), 20u);

  auto engine = make_engine(w);
  std::vector<std::shared_ptr<RequestStream>> others;
  for (int i = 0; i < 15; ++i) {
    GenerateRequest o = sampled_request(text, 40 * static_cast<size_t>(i), 5 + 7 * i, 10 + i, 1000 + i);
    if (i % 2 == 0) o.constraint = std::make_shared<ScriptedConstraint>(100 + i, 8, w.config.vocab_size);
    auto st = engine->submit(o);
    ASSERT_TRUE(st.is_ok());
    others.push_back(std::move(st).value());
  }
  probe.constraint = std::make_shared<ScriptedConstraint>(8, 16, w.config.vocab_size);
  auto batched = engine->submit(probe);
  ASSERT_TRUE(batched.is_ok());
  EXPECT_EQ(drain(*batched.value()).tokens, want);
  for (auto& o : others) EXPECT_NE(drain(*o).finish, FinishReason::kError);
}

TEST(ConstraintTest, NothingAllowedFailsTheRequestAndOnlyIt) {
  const ModelWeights& w = moe_f16();
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  auto engine = make_engine(w);
  GenerateRequest bad = sampled_request(text, 10, 12, 16, 3);
  bad.constraint = std::make_shared<ScriptedConstraint>(1, 4, w.config.vocab_size, /*empty_at=*/5);
  GenerateRequest good = sampled_request(text, 10, 12, 16, 3);
  auto sb = engine->submit(bad);
  auto sg = engine->submit(good);
  ASSERT_TRUE(sb.is_ok() && sg.is_ok());
  const Collected b = drain(*sb.value());
  EXPECT_EQ(b.finish, FinishReason::kError);
  EXPECT_EQ(b.tokens.size(), 5u);
  EXPECT_NE(b.events.back().error.message().find("constraint allows no next token"), std::string::npos)
      << b.events.back().error.to_string();
  EXPECT_EQ(drain(*sg.value()).tokens.size(), 16u);
  EXPECT_TRUE(engine->audit().is_ok());
}

TEST(ConstraintTest, AConstraintThatAllowsOnlyEosEndsTheRequest) {
  const ModelWeights& w = moe_f16();
  const std::vector<int32_t> text = testing::validation_ids("tinystories-mixtral-3.6m");
  auto engine = make_engine(w);
  GenerateRequest r = sampled_request(text, 10, 12, 16, 3);
  r.stop_token_ids = {2};
  r.constraint = std::make_shared<ScriptedConstraint>(1, 4, w.config.vocab_size, -1, /*eos_at=*/3, /*eos=*/2);
  auto s = engine->submit(r);
  ASSERT_TRUE(s.is_ok());
  const Collected got = drain(*s.value());
  EXPECT_EQ(got.finish, FinishReason::kStop);
  ASSERT_EQ(got.tokens.size(), 4u);
  EXPECT_EQ(got.tokens.back(), 2);
}

}  // namespace
}  // namespace densa
