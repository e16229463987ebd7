// `densa info` and `densa generate` (the real binary) on the tiny qwen3_moe / qwen2_moe /
// glm4_moe reference checkpoints, which ship no tokenizer: generate takes the shared one with
// --tokenizer and prints the reference's greedy continuation.
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

std::string ref_dir(const std::string& arch) {
  return (std::filesystem::path(DENSA_SOURCE_DIR) / "tests" / "data" / "reference" / arch).string();
}

std::string tokenizer_path() { return (testing::models_dir() / "tokenizer" / "tokenizer.model").string(); }

class ArchCli : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(ArchCli, InfoDescribesTheArchitecture) {
  const auto& [arch, hf_name] = GetParam();
  const RunResult r = run("info -m " + ref_dir(arch));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("architecture:   " + hf_name), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("experts:        8 (top-2 per token"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("matrix dtypes:  bf16="), std::string::npos) << r.output;
}

TEST_P(ArchCli, GenerateWithTokenizerPrintsReferenceGreedyText) {
  const std::string arch = GetParam().first;
  const auto golden = testing::read_json(std::filesystem::path(ref_dir(arch)) / "golden.json");
  const std::string prompt = golden["prompts_text"][0].get<std::string>();
  auto ids = golden["prompts"][0]["prompt_ids"].get<std::vector<TokenId>>();
  const auto greedy = golden["prompts"][0]["greedy_ids"].get<std::vector<TokenId>>();
  auto tok = Tokenizer::from_sentencepiece_file(tokenizer_path());
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  ASSERT_EQ(tok->encode(prompt, true), ids);
  // The text generate streams: after the prompt, each token's new suffix of the decoded
  // sequence (the random greedy ids include raw byte tokens, so decode incrementally too).
  std::string want = prompt;
  size_t printed = tok->decode(ids).size();
  for (TokenId id : greedy) {
    ids.push_back(id);
    const std::string text = tok->decode(ids);
    if (text.size() > printed) want += text.substr(printed);
    printed = text.size();
  }
  want += "\n";

  const RunResult r = run("generate -m " + ref_dir(arch) + " --tokenizer " + tokenizer_path() + " -n " +
                          std::to_string(greedy.size()) + " --ignore-eos -p \"" + prompt + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, want);
  const RunResult q = run("generate -m " + ref_dir(arch) + " --tokenizer " + tokenizer_path() +
                          " --weight-dtype int4 --weight-group-size 32 -n 4 -p \"" + prompt + "\"");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_EQ(q.output.rfind(prompt, 0), 0u) << q.output;
}

INSTANTIATE_TEST_SUITE_P(Reference, ArchCli,
                         ::testing::Values(std::pair{std::string("qwen3_moe"), std::string("Qwen3MoeForCausalLM")},
                                           std::pair{std::string("qwen2_moe"), std::string("Qwen2MoeForCausalLM")},
                                           std::pair{std::string("glm4_moe"), std::string("Glm4MoeForCausalLM")}),
                         [](const auto& info) { return info.param.first; });

TEST(ArchCli, GenerateWithoutTokenizerNamesTheOption) {
  const RunResult r = run("generate -m " + ref_dir("qwen3_moe") + " -n 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--tokenizer"), std::string::npos) << r.output;
  const RunResult bad = run("generate -m " + ref_dir("qwen3_moe") + " --tokenizer /nonexistent/tokenizer.model -n 2");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("/nonexistent/tokenizer.model"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace densa
