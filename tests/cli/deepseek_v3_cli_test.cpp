// The real binary on the tiny deepseek_v3 checkpoint (tests/data/reference/deepseek_v3, no
// tokenizer of its own: the shared one via --tokenizer): `densa info` shows the MLA and YaRN
// settings, `densa generate` prints the PyTorch golden greedy continuation, and quantized
// weights run.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

#include "text/tokenizer.h"
#include "cli/cli_run.h"
#include "test_util.h"

namespace densa {
namespace {

const std::string kModel = std::string(DENSA_SOURCE_DIR) + "/tests/data/reference/deepseek_v3";
const std::string kTokenizer = (testing::models_dir() / "tokenizer" / "tokenizer.model").string();
const std::string kPrompt = "Once upon a time, there was a little girl named Lily.";

TEST(DeepseekV3Cli, InfoShowsMlaAndYarn) {
  const RunResult r = run("info -m " + kModel);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DeepseekV3ForCausalLM"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("MLA, q_lora_rank 32, kv_lora_rank 32, qk_nope 16 + qk_rope 8, v 16"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("one latent row of 40 values"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("yarn, factor 4 over 64 positions"), std::string::npos) << r.output;
}

TEST(DeepseekV3Cli, GenerateMatchesGolden) {
  const auto golden = testing::read_json(std::string(kModel) + "/golden.json");
  const auto& p = golden["prompts"][0];
  std::vector<TokenId> prompt = p["prompt_ids"].get<std::vector<TokenId>>();
  const auto greedy = p["greedy_ids"].get<std::vector<TokenId>>();
  Result<Tokenizer> tok = Tokenizer::from_sentencepiece_file(kTokenizer);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  ASSERT_EQ(tok->encode(kPrompt, true), prompt);
  std::vector<TokenId> all = prompt;
  all.insert(all.end(), greedy.begin(), greedy.end());
  const std::string want = kPrompt + tok->decode(all).substr(tok->decode(prompt).size());
  const RunResult r = run("generate -m " + kModel + " --tokenizer " + kTokenizer + " -n " +
                          std::to_string(greedy.size()) + " --ignore-eos -p \"" + kPrompt + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, want + "\n");
}

TEST(DeepseekV3Cli, QuantizedWeightsRun) {
  for (const char* dtype : {"fp8", "int4 --weight-group-size 32"}) {
    const RunResult r = run("generate -m " + kModel + " --tokenizer " + kTokenizer + " --weight-dtype " + dtype +
                            " -n 6 --ignore-eos -p \"" + kPrompt + "\"");
    ASSERT_EQ(r.exit_code, 0) << dtype << ": " << r.output;
    EXPECT_EQ(r.output.rfind(kPrompt, 0), 0u) << r.output;
    EXPECT_GT(r.output.size(), kPrompt.size() + 6) << r.output;
  }
}

TEST(DeepseekV3Cli, WithoutTokenizerIsOneLineError) {
  const RunResult r = run("generate -m " + kModel + " -n 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("model has no tokenizer (pass --tokenizer)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace densa
