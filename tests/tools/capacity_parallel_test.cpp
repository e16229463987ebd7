// densa capacity --tp / --ep, NextN layers and DSA index keys, on the production deployments:
// a GLM-5-class model (glm_moe_dsa, tests/data/configs/glm-5.json) and a Kimi-K2.6-class one
// (a Kimi-K2.5 wrapper, kimi-k2.6.json) on 8 x 141 GB with --tp 8. The parameter counts below
// are written out by hand from the published shapes, not taken from the code under test.
#include <gtest/gtest.h>

#include "exec/runner.h"
#include "io/model_config.h"
#include "tools/capacity/capacity.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

fs::path config(const std::string& name) { return fs::path(DENSA_SOURCE_DIR) / "tests/data/configs" / name; }

CapacityModel load(const std::string& name) {
  Result<CapacityModel> m = load_capacity_model(config(name));
  CHECK(m.is_ok()) << m.status().to_string();
  return std::move(m).value();
}

CapacityReport plan(const CapacityModel& m, WeightFormat wf, DType kv, Parallelism p, int64_t memory = 141'000'000'000) {
  CapacityRequest req;
  req.memory_bytes = memory;
  req.weight_format = wf;
  req.kv.dtype = kv;
  req.kv.scale_mode = kv == DType::kFP8E4M3 ? KvScaleMode::kDynamic : KvScaleMode::kNone;
  req.context_tokens = 131072;
  req.parallel = p;
  Result<CapacityReport> r = plan_capacity(m, req);
  CHECK(r.is_ok()) << r.status().to_string();
  return std::move(r).value();
}

constexpr double kGB = 1e9;

TEST(CapacityParallel, Glm5ShapeAndNextn) {
  const CapacityModel m = load("glm-5.json");
  EXPECT_EQ(m.attention, KvAttention::kMla);
  EXPECT_EQ(m.index_head_dim, 128);
  EXPECT_EQ(m.num_layers, 78);
  EXPECT_EQ(m.num_nextn_layers, 1);
  // Routed experts: 75 MoE layers x 256 experts x 3 x 6144 x 2048 = 724.8B parameters; the
  // NextN layer adds its own 256 experts (9.66B), in the checkpoint only.
  int64_t expert_params = 0, nextn_expert_params = 0;
  for (const WeightGroup& g : m.weights) {
    if (g.name.rfind("experts.", 0) == 0) (g.nextn ? nextn_expert_params : expert_params) += g.num_params();
  }
  EXPECT_EQ(expert_params, int64_t{75} * 256 * 3 * 6144 * 2048);
  EXPECT_EQ(nextn_expert_params, int64_t{256} * 3 * 6144 * 2048);
  // The model and the runtime agree that it is MLA+DSA with one NextN layer.
  Result<ModelConfig> c = parse_hf_config(config("glm-5.json"));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_STREQ(c->attention_kind(), "MLA+DSA");
  EXPECT_EQ(c->num_nextn_layers, 1);
  EXPECT_EQ(c->dsa.index_topk, 2048);
  EXPECT_EQ(c->first_k_dense_replace, 3);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
}

// GLM-5 on 8 x 141 GB, --tp 8. Whole checkpoint: FP8 ~757 GB with the MTP layer (705 GiB),
// INT4 ~421 GB without it; per GPU ~95 GB FP8 (88 GiB) and ~54 GB INT4: an eighth of the
// loaded model (52.6 GB) plus the parts every rank holds whole (q_a / kv_a, the indexer,
// routers: ~1.3 GB). Tolerance 2%, 4% for the INT4 per-GPU figure against 52 GB.
TEST(CapacityParallel, Glm5On8xH200Tp8) {
  const CapacityModel m = load("glm-5.json");
  const CapacityReport fp8 = plan(m, WeightFormat::kFP8, DType::kFP8E4M3, {8, 8});
  const CapacityReport int4 = plan(m, WeightFormat::kINT4, DType::kFP8E4M3, {8, 8});
  const double gib = double(1LL << 30);
  EXPECT_NEAR(fp8.checkpoint.bytes() / gib, 705.0, 705.0 * 0.02);
  EXPECT_NEAR(estimate_weight_bytes(m, WeightFormat::kINT4).bytes() / kGB, 421.0, 421.0 * 0.02);
  EXPECT_NEAR(fp8.weights.bytes() / gib, 88.0, 88.0 * 0.02);
  EXPECT_NEAR(int4.weights.bytes() / kGB, 52.0, 52.0 * 0.04);
  // Per rank is more than an eighth of the loaded model (replicated q_a / kv_a / indexer /
  // norms / routers) and less than an eighth plus those.
  const int64_t whole = estimate_weight_bytes(m, WeightFormat::kFP8).bytes();
  EXPECT_GT(fp8.weights.bytes(), whole / 8);
  EXPECT_LT(fp8.weights.bytes(), whole / 8 + int64_t{3'000'000'000});
  // KV per rank: the latent row (576) replicated per attention-TP rank, plus DSA's FP8 index
  // key (128 + f32 scale) per layer; FP8 latent with a dynamic scale per layer.
  EXPECT_EQ(fp8.kv_token_bytes.data, 78 * (576 + 128 + 4));
  EXPECT_EQ(fp8.kv_token_bytes.scales, 78 * 4);
  const CapacityReport bf16 = plan(m, WeightFormat::kFP8, DType::kBF16, {8, 8});
  EXPECT_EQ(bf16.kv_token_bytes.data, 78 * (576 * 2 + 128 + 4));
}

// Kimi-K2.6 class on 8 x 141 GB, --tp 8: the FP8 latent cache holds twice BF16's tokens
// (within the one f32 scale per token per layer: 576 / 580).
TEST(CapacityParallel, KimiK26Fp8KvHoldsTwiceBf16) {
  const CapacityModel m = load("kimi-k2.6.json");
  EXPECT_TRUE(m.vision_tower);
  EXPECT_EQ(m.attention, KvAttention::kMla);
  const CapacityReport bf16 = plan(m, WeightFormat::kINT4, DType::kBF16, {8, 8});
  const CapacityReport fp8 = plan(m, WeightFormat::kINT4, DType::kFP8E4M3, {8, 8});
  EXPECT_EQ(bf16.kv_token_bytes.data, 61 * 576 * 2);  // replicated: the whole latent per rank
  const double ratio = double(fp8.num_tokens) / double(bf16.num_tokens);
  EXPECT_GT(ratio, 1.97);
  EXPECT_LE(ratio, 2.0);
  // ~1.03T parameters, ~0.58 TB in INT4: ~72 GB per GPU, the rest of 141 GB is KV.
  EXPECT_NEAR(bf16.weights.bytes() / kGB, 73.0, 73.0 * 0.03);
}

// GQA heads split by TP; fewer KV heads than ranks are replicated (one per rank).
TEST(CapacityParallel, GqaKvHeadsSplitByTp) {
  const CapacityModel m = load("glm-4.5.json");  // 8 KV heads of 128, 92 layers
  EXPECT_EQ(plan(m, WeightFormat::kFP8, DType::kBF16, {1, 1}, 1'128'000'000'000).kv_token_bytes.data,
            92 * 2 * 8 * 128 * 2);
  EXPECT_EQ(plan(m, WeightFormat::kFP8, DType::kBF16, {4, 4}).kv_token_bytes.data, 92 * 2 * 2 * 128 * 2);
  EXPECT_EQ(plan(m, WeightFormat::kFP8, DType::kBF16, {8, 8}).kv_token_bytes.data, 92 * 2 * 1 * 128 * 2);
  EXPECT_EQ(plan(m, WeightFormat::kFP8, DType::kBF16, {16, 16}).kv_token_bytes.data, 92 * 2 * 1 * 128 * 2);
}

// Experts by EP or by TP: the same bytes to within scale rounding; attention by TP only.
TEST(CapacityParallel, ExpertsSplitByEpAndTp) {
  const CapacityModel m = load("glm-5.json");
  WeightGroup experts;
  for (const WeightGroup& g : m.weights) {
    if (g.name == "experts.gate_up" && !g.nextn) experts = g;
  }
  ASSERT_EQ(experts.experts, 256);
  const WeightGroup ep8 = weight_group_per_rank(experts, {8, 8});
  EXPECT_EQ(ep8.count, experts.count / 8);  // 32 whole experts per rank
  EXPECT_EQ(ep8.rows, 2048);
  const WeightGroup ep2 = weight_group_per_rank(experts, {8, 2});
  EXPECT_EQ(ep2.count, experts.count / 2);  // 128 experts, each split 4 ways
  EXPECT_EQ(ep2.rows, 512);
  const WeightGroup tp_only = weight_group_per_rank(experts, {8, 1});
  EXPECT_EQ(tp_only.count, experts.count);
  EXPECT_EQ(tp_only.rows, 256);
  EXPECT_EQ(ep8.num_params(), tp_only.num_params());
  EXPECT_FALSE(check_parallelism({8, 3}).is_ok());
  EXPECT_FALSE(check_parallelism({0, 1}).is_ok());
  CapacityRequest bad;
  bad.memory_bytes = 141'000'000'000;
  bad.context_tokens = 1024;
  bad.parallel = {8, 3};
  EXPECT_FALSE(plan_capacity(m, bad).is_ok());
}

}  // namespace
}  // namespace densa
