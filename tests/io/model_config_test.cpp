#include "io/model_config.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace densa {
namespace {

using ::densa::testing::model_dir;

TEST(ModelConfigTest, ParsesLlamaFixture) {
  auto c = parse_hf_config(model_dir("tinystories-llama-1m") / "hf" / "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->vocab_size, 1024);
  EXPECT_EQ(c->hidden_size, 128);
  EXPECT_EQ(c->num_layers, 4);
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->intermediate_size, 384);
  EXPECT_EQ(c->num_experts, 0);
  EXPECT_FALSE(c->is_moe());
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_EQ(c->max_position_embeddings, 256);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_id, 2);
}

TEST(ModelConfigTest, ParsesMixtralFixture) {
  auto c = parse_hf_config(model_dir("tinystories-mixtral-3.6m") / "hf" / "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "MixtralForCausalLM");
  EXPECT_EQ(c->intermediate_size, 256);
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->num_experts_per_tok, 2);
  EXPECT_TRUE(c->is_moe());
}

TEST(ModelConfigTest, HeadDimKeyOverridesDefault) {
  auto c = parse_hf_config_text(
      R"({"architectures":["LlamaForCausalLM"],"vocab_size":10,"hidden_size":64,"num_hidden_layers":1,
          "num_attention_heads":4,"intermediate_size":32,"head_dim":32,"eos_token_id":[7,8]})",
      "cfg");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->eos_token_id, 7);
}

TEST(ModelConfigTest, UnknownArchitectureIsUnimplemented) {
  auto c = parse_hf_config_text(R"({"architectures":["Qwen2ForCausalLM"],"hidden_size":8})", "dir/config.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("dir/config.json"), std::string::npos);
  EXPECT_NE(c.status().message().find("Qwen2ForCausalLM"), std::string::npos);
}

TEST(ModelConfigTest, MalformedJsonIsInvalidArgument) {
  auto c = parse_hf_config_text(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": )", "bad/config.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("bad/config.json"), std::string::npos);
  EXPECT_NE(c.status().message().find("malformed JSON"), std::string::npos);
}

TEST(ModelConfigTest, WrongTypeNamesKey) {
  auto c = parse_hf_config_text(
      R"({"architectures":["LlamaForCausalLM"],"vocab_size":"many","hidden_size":64,"num_hidden_layers":1,
          "num_attention_heads":4,"intermediate_size":32})",
      "cfg.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("vocab_size"), std::string::npos);
}

TEST(ModelConfigTest, MissingKeyNamesKey) {
  auto c = parse_hf_config_text(R"({"architectures":["MixtralForCausalLM"],"vocab_size":10,"hidden_size":64,
      "num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":32})", "cfg.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("num_local_experts"), std::string::npos);
}

TEST(ModelConfigTest, MissingFileIsNotFound) {
  auto c = parse_hf_config("/nonexistent/config.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace densa
