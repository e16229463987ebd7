// Refuse, never scrub: a request whose logits hold NaN is failed with a reason naming the
// batch, never sampled, and the counter moves; a request batched beside it is untouched.
// The NaN is real: a private copy of the MoE fixture has one token's embedding row set to NaN,
// so every sequence that holds that token computes NaN hidden states and logits through the
// real forward pass, while sequences without it compute exactly what the clean model does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "model/model_loader.h"

namespace densa {
namespace {

using testing::Collected;
using testing::drain;

constexpr TokenId kPoisoned = 500;

// The fixture with token kPoisoned's embedding row replaced by NaN (in an arena copy; the
// mapped file is untouched). The LM head must be a separate matrix, or every row's logit for
// kPoisoned would be NaN and no request would be clean.
ModelWeights poisoned_moe() {
  Result<ModelWeights> r =
      load_model(testing::model_dir("tinystories-mixtral-3.6m") / "gguf" / "tinystories-mixtral-3.6m-f16.gguf");
  CHECK(r.is_ok()) << r.status().to_string();
  ModelWeights w = std::move(r).value();
  WeightView& e = w.tok_embeddings;
  CHECK(w.lm_head.data != e.data) << "the fixture's LM head is tied to its embeddings";
  CHECK(e.layout == WeightLayout::kRows && !e.has_scales()) << "embedding layout";
  uint8_t* copy = w.alloc_owned(static_cast<size_t>(e.bytes()));
  std::memcpy(copy, e.data, static_cast<size_t>(e.bytes()));
  uint8_t* row = copy + kPoisoned * e.row_bytes();
  for (int64_t c = 0; c < e.cols; ++c) {
    if (e.dtype == DType::kF32) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(row + 4 * c, &nan, 4);
    } else {
      CHECK(e.dtype == DType::kF16 || e.dtype == DType::kBF16) << "embedding dtype";
      const uint16_t nan = e.dtype == DType::kF16 ? 0x7E00 : 0x7FC0;
      std::memcpy(row + 2 * c, &nan, 2);
    }
  }
  e.data = copy;
  return w;
}

GenerateRequest greedy(std::vector<TokenId> prompt, int max_new) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.max_new_tokens = max_new;
  r.ignore_eos = true;
  return r;
}

TEST(NonFiniteLogits, PoisonedRequestIsRefusedAndItsBatchNeighbourIsNot) {
  const ModelWeights weights = poisoned_moe();
  EngineConfig c;
  c.kv_dtype = DType::kBF16;
  c.page_size = 8;
  c.num_threads = 2;
  auto created = Engine::create(weights, c);
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  Engine& engine = **created;

  // The clean request decodes 24 tokens, so the poisoned one (submitted right after) runs in a
  // batch beside it; its first sampled row is NaN.
  const GenerateRequest clean = greedy({1, 300, 301, 302, 303, 304, 305}, 24);
  GenerateRequest poisoned = greedy({1, 300, kPoisoned, 302}, 8);
  poisoned.sampling.temperature = 0.8f;  // the sampled path, not only greedy
  poisoned.sampling.seed = 7;
  auto a = engine.submit(clean);
  auto b = engine.submit(poisoned);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  const Collected ca = drain(**a);
  const Collected cb = drain(**b);

  EXPECT_EQ(cb.finish, FinishReason::kError);
  EXPECT_TRUE(cb.tokens.empty()) << "a token was sampled from NaN logits";
  const std::string why = cb.events.back().error.message();
  EXPECT_NE(why.find("non-finite logits"), std::string::npos) << why;
  EXPECT_NE(why.find("NaN"), std::string::npos) << why;
  EXPECT_NE(why.find("in a batch of 2 sequences"), std::string::npos) << why;
  EXPECT_NE(why.find("refused rather than sampled"), std::string::npos) << why;

  EXPECT_EQ(ca.finish, FinishReason::kLength);
  EXPECT_EQ(ca.tokens, testing::oracle(testing::moe_f16(), clean, DType::kBF16));

  const EngineStats s = engine.stats();
  EXPECT_EQ(s.nonfinite_logit_rows, 1);
  EXPECT_EQ(s.kv_integrity_violations, 0);
  EXPECT_TRUE(engine.audit().is_ok());
  engine.shutdown();
}

}  // namespace
}  // namespace densa
