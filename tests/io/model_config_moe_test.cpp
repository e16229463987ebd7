// config.json of the MoE families beyond Mixtral: Qwen3-MoE, Qwen2-MoE and GLM-4.5 (the
// real GLM-4.5 hyper-parameters in tests/data/configs and the tiny reference checkpoints).
#include <gtest/gtest.h>

#include "io/model_config.h"
#include "test_util.h"

namespace densa {
namespace {

std::filesystem::path source(const std::string& rel) { return std::filesystem::path(DENSA_SOURCE_DIR) / rel; }

TEST(ModelConfigMoeTest, Glm45PublishedConfig) {
  auto c = parse_hf_config(source("tests/data/configs/glm-4.5.json"));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "Glm4MoeForCausalLM");
  EXPECT_EQ(c->num_layers, 92);
  EXPECT_EQ(c->num_heads, 96);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->rope_dim(), 64);  // partial_rotary_factor 0.5
  EXPECT_TRUE(c->attention_bias);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->num_experts, 160);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe_intermediate_size, 1536);
  EXPECT_EQ(c->intermediate_size, 12288);
  EXPECT_EQ(c->shared_expert_intermediate_size, 1536);  // 1 shared expert
  EXPECT_FALSE(c->shared_expert_gate);
  EXPECT_EQ(c->moe_routing, MoeRouting::kSigmoidGrouped);
  EXPECT_FLOAT_EQ(c->routed_scaling_factor, 2.5f);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FALSE(c->is_moe_layer(2));  // first_k_dense_replace 3
  EXPECT_TRUE(c->is_moe_layer(3));
  EXPECT_TRUE(c->is_moe_layer(91));
  EXPECT_EQ(c->eos_token_id, 151329);
}

TEST(ModelConfigMoeTest, Qwen3ReferenceConfig) {
  auto c = parse_hf_config(source("tests/data/reference/qwen3_moe/config.json"));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->rope_dim(), c->head_dim);
  EXPECT_EQ(c->moe_routing, MoeRouting::kSoftmaxTopK);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_EQ(c->shared_expert_intermediate_size, 0);
  EXPECT_TRUE(c->is_moe_layer(0));
  EXPECT_FALSE(c->is_moe_layer(1));  // mlp_only_layers [1]
  EXPECT_TRUE(c->is_moe_layer(2));
}

TEST(ModelConfigMoeTest, Qwen2ReferenceConfig) {
  auto c = parse_hf_config(source("tests/data/reference/qwen2_moe/config.json"));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_EQ(c->shared_expert_intermediate_size, 64);
  EXPECT_TRUE(c->shared_expert_gate);
}

const char* kQwen = R"({"architectures":["Qwen3MoeForCausalLM"],"vocab_size":10,"hidden_size":64,
    "num_hidden_layers":4,"num_attention_heads":4,"intermediate_size":32,"num_experts":4,
    "num_experts_per_tok":2,"moe_intermediate_size":16)";

TEST(ModelConfigMoeTest, DecoderSparseStep) {
  auto c = parse_hf_config_text(std::string(kQwen) + R"(,"decoder_sparse_step":2})", "cfg.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  EXPECT_FALSE(c->is_moe_layer(2));
  EXPECT_TRUE(c->is_moe_layer(3));
}

TEST(ModelConfigMoeTest, BadValuesNameTheKey) {
  for (const auto& [extra, key] : std::vector<std::pair<std::string, std::string>>{
           {R"(,"mlp_only_layers":[7]})", "mlp_only_layers"},
           {R"(,"decoder_sparse_step":0})", "decoder_sparse_step"},
           {R"(,"num_experts_per_tok":9})", "num_experts_per_tok"}}) {
    std::string text = std::string(kQwen) + extra;
    if (key == "num_experts_per_tok") text.replace(text.find("\"num_experts_per_tok\":2,"), 24, "");
    auto c = parse_hf_config_text(text, "cfg.json");
    ASSERT_FALSE(c.is_ok()) << extra;
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().message();
  }
  auto missing = parse_hf_config_text(
      R"({"architectures":["Qwen2MoeForCausalLM"],"vocab_size":10,"hidden_size":64,"num_hidden_layers":1,
          "num_attention_heads":4,"intermediate_size":32,"num_experts":4,"num_experts_per_tok":2,
          "moe_intermediate_size":16})", "cfg.json");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("shared_expert_intermediate_size"), std::string::npos);
}

TEST(ModelConfigMoeTest, GlmGroupsMustFitTheExperts) {
  const std::string glm = R"({"architectures":["Glm4MoeForCausalLM"],"vocab_size":10,"hidden_size":64,
      "num_hidden_layers":2,"num_attention_heads":4,"head_dim":16,"intermediate_size":32,"n_routed_experts":8,
      "num_experts_per_tok":2,"moe_intermediate_size":16,)";
  for (const char* bad : {R"("n_group":3})", R"("n_group":8})", R"("n_group":4,"topk_group":5})",
                          R"("partial_rotary_factor":0.1})"}) {
    auto c = parse_hf_config_text(glm + bad, "cfg.json");
    ASSERT_FALSE(c.is_ok()) << bad;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  }
  auto ok = parse_hf_config_text(glm + R"("n_group":4,"topk_group":1})", "cfg.json");
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->rope_dim(), 8);
  EXPECT_FALSE(ok->is_moe_layer(0));
}

// Values whose derived sizes leave int's range are refused by name (they were undefined
// behaviour: a double 1e300 converted to int, int sums and products that overflowed).
TEST(ModelConfigMoeTest, DerivedSizesOutOfRangeAreRefused) {
  const std::string glm = R"({"architectures":["Glm4MoeForCausalLM"],"vocab_size":10,"hidden_size":64,
      "num_hidden_layers":2,"num_attention_heads":4,"head_dim":16,"intermediate_size":32,"n_routed_experts":8,
      "num_experts_per_tok":2,"moe_intermediate_size":16,"n_group":4,"topk_group":1,)";
  const std::pair<const char*, const char*> cases[] = {
      {R"("partial_rotary_factor":1e300})", "partial_rotary_factor"},
      {R"("partial_rotary_factor":-0.5})", "partial_rotary_factor"},
      {R"("n_shared_experts":2147483647})", "n_shared_experts"},
      {R"("eos_token_id":-5})", "eos_token_id"},
      {R"("bos_token_id":[4294967296]})", "bos_token_id"},
  };
  for (const auto& [bad, key] : cases) {
    auto c = parse_hf_config_text(glm + bad, "cfg.json");
    ASSERT_FALSE(c.is_ok()) << bad;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace densa
