// `densa capacity`'s parameter counting for the qwen3_moe / qwen2_moe / glm4_moe layouts
// (q/k norm, qkv bias, shared experts with and without a gate, routers with correction bias,
// leading dense layers, mlp_only_layers) equals what densa actually loads from the reference
// checkpoints, and the GLM-4.5 8K-context table of docs/performance/capacity.md holds its invariants.
#include <gtest/gtest.h>

#include "model/model_loader.h"
#include "test_util.h"
#include "tools/capacity/capacity.h"

namespace densa {
namespace {

std::filesystem::path source(const std::string& rel) { return std::filesystem::path(DENSA_SOURCE_DIR) / rel; }

TEST(CapacityArchTest, ParameterCountEqualsLoadedReferenceCheckpoint) {
  for (const char* arch : {"qwen3_moe", "qwen2_moe", "glm4_moe"}) {
    const auto dir = source(std::string("tests/data/reference/") + arch);
    auto model = load_capacity_model(dir);
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    auto weights = load_model(dir);
    ASSERT_TRUE(weights.is_ok()) << weights.status().to_string();
    EXPECT_EQ(model->num_params(), weights->num_params()) << arch;
    EXPECT_EQ(model->num_kv_heads, weights->config.num_kv_heads) << arch;
    EXPECT_EQ(model->head_dim, weights->config.head_dim) << arch;
  }
}

// GLM-4.5 on 8 x 141 GB at 8K context: FP8 KV (static scales) holds 2x the BF16 tokens up to
// one page, smaller weights leave more KV, and requests = pages / (8192 / 16).
TEST(CapacityArchTest, Glm45EightKContextOnEightH200) {
  auto model = load_capacity_model(source("tests/data/configs/glm-4.5.json"));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  int64_t prev_tokens = 0;
  for (WeightFormat wf : {WeightFormat::kBF16, WeightFormat::kFP8, WeightFormat::kINT4}) {
    CapacityRequest req;
    req.memory_bytes = 1128'000'000'000LL;
    req.weight_format = wf;
    req.context_tokens = 8192;
    auto bf16 = plan_capacity(*model, req);
    req.kv = KvFormat{DType::kFP8E4M3, KvScaleMode::kStatic, 16};
    auto fp8 = plan_capacity(*model, req);
    ASSERT_TRUE(bf16.is_ok() && fp8.is_ok()) << weight_format_name(wf);
    EXPECT_EQ(bf16->pages_per_request, 512);
    EXPECT_EQ(bf16->num_requests, bf16->num_pages / 512);
    EXPECT_GE(fp8->num_tokens, 2 * bf16->num_tokens);
    EXPECT_LE(fp8->num_tokens, 2 * bf16->num_tokens + 16);
    EXPECT_GT(bf16->num_tokens, prev_tokens) << weight_format_name(wf);
    prev_tokens = bf16->num_tokens;
    std::printf("[ note ] GLM-4.5 %s weights %.1f GB: BF16 KV %lld tokens / %lld req, FP8 KV %lld tokens / %lld req @ 8K\n",
                std::string(weight_format_name(wf)).c_str(), bf16->weights.bytes() / 1e9,
                static_cast<long long>(bf16->num_tokens), static_cast<long long>(bf16->num_requests),
                static_cast<long long>(fp8->num_tokens), static_cast<long long>(fp8->num_requests));
  }
}

}  // namespace
}  // namespace densa
