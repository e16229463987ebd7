// The fixtures' golden greedy continuations (golden.json greedy_ids, 48 tokens, fp32 argmax,
// no stop on </s>) through the engine: all four prompts of a fixture at once, paged KV.
// F32 KV must reproduce them exactly. BF16 KV rounds K/V to 8 mantissa bits; it may only flip
// a step whose golden top-1/top-2 logit margin is below kBf16MarginFloor, and the test names
// any such step. Measured: BF16 KV flips none of the 2 x 4 x 48 golden tokens (the smallest
// golden margins are 0.0089 (llama) and 0.0127 (mixtral)), so today both dtypes match exactly.
#include <gtest/gtest.h>

#include "engine/engine_test_util.h"

namespace densa {
namespace {

using testing::drain;
using testing::model_dir;
using testing::read_json;

// Largest logit perturbation we attribute to BF16 KV on these fixtures; a flip at a step
// whose golden margin exceeds it is a bug, not rounding.
constexpr double kBf16MarginFloor = 0.05;

struct GoldenCase {
  std::string model;
  DType kv_dtype;
};

class EngineGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(EngineGolden, GreedyContinuationsMatch) {
  const GoldenCase& gc = GetParam();
  const std::string file = gc.model + "-f16.gguf";
  // The golden tokens are fp32 compute; F16 matrices keep fp32 activations here. (On AMX tiles,
  // x rounded to bf16, llama prompt 3 flips at step 3, the smallest golden margin of all four
  // prompts of both fixtures: 0.0089.)
  auto loaded = load_model(model_dir(gc.model) / "gguf" / file, LoadOptions{.bf16_f32_activations = true});
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EngineConfig c;
  c.kv_dtype = gc.kv_dtype;
  c.audit_every_step = true;
  c.chunked_prefill_size = 8;  // prompts split across steps, mixed with the others' decodes
  auto engine = Engine::create(loaded.value(), c).value();

  const auto golden = read_json(model_dir(gc.model) / "golden" / "golden.json");
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : golden["prompts"]) {
    GenerateRequest r;
    r.prompt = p["prompt_ids"].get<std::vector<TokenId>>();
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = 48;
    r.ignore_eos = true;
    streams.push_back(engine->submit(r).value());
  }
  int idx = 0;
  for (const auto& p : golden["prompts"]) {
    const auto want = p["greedy_ids"].get<std::vector<TokenId>>();
    const auto margins = p["top1_top2_margins"].get<std::vector<double>>();
    const std::vector<TokenId> got = drain(*streams[idx]).tokens;
    ASSERT_EQ(got.size(), want.size()) << "prompt " << idx;
    if (gc.kv_dtype == DType::kF32) {
      EXPECT_EQ(got, want) << "prompt " << idx;
    } else {
      size_t i = 0;
      while (i < want.size() && got[i] == want[i]) ++i;
      if (i < want.size()) {
        EXPECT_LT(margins[i], kBf16MarginFloor)
            << "prompt " << idx << " flips at step " << i << " with golden margin " << margins[i];
        std::printf("[ note ] %s BF16 KV: prompt %d flips at step %zu (golden margin %.5f)\n",
                    gc.model.c_str(), idx, i, margins[i]);
      }
    }
    ++idx;
  }
  ASSERT_TRUE(engine->audit().is_ok());
  EXPECT_EQ(engine->stats().kv_pages_used, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Engine, EngineGolden,
    ::testing::Values(GoldenCase{"tinystories-mixtral-3.6m", DType::kF32},
                      GoldenCase{"tinystories-mixtral-3.6m", DType::kBF16},
                      GoldenCase{"tinystories-llama-1m", DType::kF32},
                      GoldenCase{"tinystories-llama-1m", DType::kBF16}),
    [](const ::testing::TestParamInfo<GoldenCase>& info) {
      std::string s = info.param.model + (info.param.kv_dtype == DType::kF32 ? "_f32kv" : "_bf16kv");
      for (char& ch : s) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

}  // namespace
}  // namespace densa
