// gen-model --tokenizer DIR: a real tokenizer (Qwen3's, from the test oracles) copied into a
// random-weight HF checkpoint, whose vocabulary and EOS come from it.
#include "tools/model_files/gen_model_tokenizer.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include "test_util.h"
#include "tools/model_files/gen_model.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("densa_gen_tok_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The smallest Llama shape gen-model takes; the tokenizer sets the vocabulary.
GenModelOptions tiny_llama() {
  GenModelOptions o;
  o.arch = "llama";
  o.hidden_size = 64;
  o.num_layers = 1;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.intermediate_size = 128;
  return o;
}

TEST(GenModelTokenizer, QwenTokenizerSetsVocabularyAndEos) {
  const fs::path src = testing::real_tokenizer_dir("qwen3");
  ASSERT_TRUE(fs::exists(src / "tokenizer.json")) << src << " (the build installs the test oracles)";
  auto info = inspect_tokenizer_dir(src);
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  // Qwen3's ids end with <think> 151667 and </think> 151668; its eos_token is <|im_end|>
  // (151645) and it declares no BOS token.
  EXPECT_EQ(info.value().vocab_size, 151669);
  EXPECT_EQ(info.value().eos_id, 151645);
  EXPECT_FALSE(info.value().bos_id.has_value());

  const fs::path out = scratch("qwen3");
  GenModelOptions o = tiny_llama();
  o.format = "hf";
  o.dtype = "bf16";
  o.tokenizer = src.string();
  o.output = out;
  auto r = generate_model(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const nlohmann::json cfg = testing::read_json(out / "config.json");
  EXPECT_EQ(cfg["vocab_size"], 151669);
  EXPECT_EQ(cfg["eos_token_id"], 151645);
  EXPECT_EQ(testing::read_text(out / "tokenizer.json"), testing::read_text(src / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(out / "tokenizer_config.json"));
  fs::remove_all(out);
}

TEST(GenModelTokenizer, ClearErrors) {
  GenModelOptions o = tiny_llama();
  o.output = scratch("err") / "m";
  o.format = "hf";
  o.tokenizer = "/nonexistent/tokenizer/dir";
  auto missing = generate_model(o);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("not a directory"), std::string::npos) << missing.status().to_string();

  const fs::path empty = scratch("empty");
  auto none = inspect_tokenizer_dir(empty);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("neither tokenizer.json nor tiktoken.model"), std::string::npos);
  {
    std::ofstream(empty / "tokenizer.json") << "{\"model\": {\"vocab\": [1, 2]}}";
  }
  auto bad = inspect_tokenizer_dir(empty);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("no model.vocab object"), std::string::npos) << bad.status().to_string();
  {
    std::ofstream(empty / "tokenizer.json") << "{\"model\": {\"vocab\": {\"a\": 0";
  }
  auto truncated = inspect_tokenizer_dir(empty);
  ASSERT_FALSE(truncated.is_ok());
  EXPECT_NE(truncated.status().message().find("not valid JSON"), std::string::npos);
  fs::remove_all(empty);
}

}  // namespace
}  // namespace densa
