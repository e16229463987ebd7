// deepseek_v3 (MLA latent KV cache) through the Engine: the four golden prompts of
// tests/data/reference/deepseek_v3 at once, greedy, prompts chunked across steps and pages
// (mixed with the others' decodes), prefix cache on, kv_audit after every step, KV integrity
// checks (tags + page digests) on every batch.
//   * Every KV dtype: each request's tokens equal the single-sequence oracle (generate() on a
//     contiguous latent cache of the same dtype) exactly: paging, batching, chunking and the
//     FP8 latent with dynamic per-token scales change nothing.
//   * Static FP8 latent scales (calibrated): the engine equals the generator with the same scales.
//   * F32 / BF16 KV: the tokens equal the PyTorch golden continuations, except after a step
//     whose golden top-1/top-2 margin is below the dtype's logit error bound.
#include <gtest/gtest.h>

#include "engine/engine_test_util.h"
#include "quality/kv_calibration.h"

namespace densa {
namespace {

using testing::drain;
using testing::read_binary;
using testing::read_json;

std::filesystem::path ref_dir() {
  return std::filesystem::path(DENSA_SOURCE_DIR) / "tests/data/reference/deepseek_v3";
}

const ModelWeights& weights() {
  static const ModelWeights* w = [] {
    auto r = load_model(ref_dir());
    CHECK(r.is_ok()) << r.status().to_string();
    return new ModelWeights(std::move(r).value());
  }();
  return *w;
}

struct EngineCase {
  DType kv_dtype;
  int page_size;
  double margin_floor;  // golden flips allowed only at steps with a smaller golden margin
};

class DeepseekV3Engine : public ::testing::TestWithParam<EngineCase> {};

TEST_P(DeepseekV3Engine, GreedyMatchesOracleAndGolden) {
  const EngineCase& ec = GetParam();
  EngineConfig c;
  c.kv_dtype = ec.kv_dtype;
  c.page_size = ec.page_size;
  c.audit_every_step = true;
  c.chunked_prefill_size = 9;
  c.num_threads = 2;
  c.kv_integrity = KvIntegrityPolicy{KvIntegrityMode::kDigest, 1, 1};
  auto created = Engine::create(weights(), c);
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  auto engine = std::move(created).value();

  const auto golden = read_json(ref_dir() / "golden.json");
  const std::vector<GenerateRequest> requests = testing::golden_greedy_requests(golden);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateRequest& r : requests) streams.push_back(engine->submit(r).value());
  int idx = 0;
  for (const auto& p : golden["prompts"]) {
    const testing::Collected got = drain(*streams[idx]);
    ASSERT_EQ(got.finish, FinishReason::kLength) << got.events.back().error.to_string();
    // Exactly the single-sequence oracle of the same KV dtype.
    EXPECT_EQ(got.tokens, testing::oracle(weights(), requests[idx], ec.kv_dtype)) << "prompt " << idx;
    if (ec.kv_dtype != DType::kFP8E4M3) {
      const auto want = p["greedy_ids"].get<std::vector<TokenId>>();
      const auto logits = read_binary<float>(ref_dir() / ("prompt" + std::to_string(idx) + ".logits.f32.bin"));
      for (size_t k = 0; k < want.size(); ++k) {
        if (got.tokens[k] == want[k]) continue;
        const float* row = logits.data() + (requests[idx].prompt.size() - 1 + k) * 1024;
        std::vector<float> top(row, row + 1024);
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
        EXPECT_LT(top[0] - top[1], ec.margin_floor) << "prompt " << idx << " flips at step " << k;
        break;
      }
    }
    ++idx;
  }
  ASSERT_TRUE(engine->audit().is_ok());
  EXPECT_EQ(engine->stats().kv_pages_used, 0);
}

INSTANTIATE_TEST_SUITE_P(Kv, DeepseekV3Engine,
                         ::testing::Values(EngineCase{DType::kF32, 16, 1e-3}, EngineCase{DType::kBF16, 4, 0.3},
                                           EngineCase{DType::kFP8E4M3, 16, 0.0}),
                         [](const ::testing::TestParamInfo<EngineCase>& info) {
                           return std::string(dtype_name(info.param.kv_dtype)) + "_page" +
                                  std::to_string(info.param.page_size);
                         });

// Static FP8 latent scales (two per layer: c_kv and k_pe) from a calibration pass: the engine
// (paged, batched, chunked) gives exactly the tokens of the single-sequence generator with the
// same scales; scales of the wrong shape are a clear error at start-up, not a crash.
TEST(DeepseekV3Engine, StaticFp8ScalesMatchOracle) {
  const auto golden = read_json(ref_dir() / "golden.json");
  std::vector<TokenId> calibration;
  for (const auto& p : golden["prompts"]) {
    const auto ids = p["prompt_ids"].get<std::vector<TokenId>>();
    calibration.insert(calibration.end(), ids.begin(), ids.end());
  }
  ThreadPool pool(2);
  const KvScales scales = calibrate_kv_scales(weights(), calibration, KvCalibrationOptions{}, &pool);
  ASSERT_EQ(scales.num_kv_heads, 1);
  ASSERT_EQ(scales.values.size(), static_cast<size_t>(weights().config.num_layers) * 2);

  EngineConfig c;
  c.kv_dtype = DType::kFP8E4M3;
  c.kv_scales = scales;
  c.page_size = 4;
  c.chunked_prefill_size = 7;
  c.audit_every_step = true;
  c.num_threads = 2;
  c.kv_integrity = KvIntegrityPolicy{KvIntegrityMode::kDigest, 1, 1};
  auto created = Engine::create(weights(), c);
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  auto engine = std::move(created).value();
  EXPECT_EQ(engine->kv_layout().scale_mode, KvScaleMode::kStatic);
  const std::vector<GenerateRequest> requests = testing::golden_greedy_requests(golden);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateRequest& r : requests) streams.push_back(engine->submit(r).value());
  for (size_t i = 0; i < requests.size(); ++i) {
    const testing::Collected got = drain(*streams[i]);
    ASSERT_EQ(got.finish, FinishReason::kLength) << got.events.back().error.to_string();
    GenerateOptions o;
    o.max_new_tokens = requests[i].max_new_tokens;
    o.sampling.temperature = 0.0f;
    o.stop_at_eos = false;
    o.kv_dtype = DType::kFP8E4M3;
    o.kv_scale_mode = KvScaleMode::kStatic;
    o.kv_scales = &scales;
    EXPECT_EQ(got.tokens, generate(weights(), requests[i].prompt, o, &pool,
                                   [](TokenId, std::span<const float>) { return true; }))
        << "prompt " << i;
  }
  ASSERT_TRUE(engine->audit().is_ok());
  EXPECT_EQ(engine->stats().kv_pages_used, 0);
  engine->shutdown();

  KvScales wrong = scales;
  wrong.num_kv_heads = 4;  // per-head scales of a GQA cache
  wrong.values.resize(static_cast<size_t>(weights().config.num_layers) * 2 * 4, 0.01f);
  c.kv_scales = wrong;
  auto rejected = Engine::create(weights(), c);
  ASSERT_FALSE(rejected.is_ok());
  EXPECT_NE(rejected.status().message().find("model needs 3x2x1"), std::string::npos) << rejected.status().message();
}

}  // namespace
}  // namespace densa
