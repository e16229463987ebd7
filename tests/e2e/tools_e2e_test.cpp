// Tool calls and structured outputs end to end with the official `openai` client
// (tests/e2e/openai_tools.mjs) against `densa serve` on random-weight checkpoints with a real
// tokenizer and template: Qwen3's (hermes format), and Kimi K2's and GLM-4.6's templates with
// a tokenizer built from Qwen3's tokenizer.json plus the family's special tokens
// (tests/family_tokenizer.h says why and how): the full tool loop streaming and not; under tool_choice
// required / named and response_format json_schema at temperature 1 every answer parses and
// validates against its schema with ajv (an independent validator); streamed answers fold to
// the non-streamed ones of the same seed, many requests at once.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/node_project.h"
#include "family_tokenizer.h"
#include "e2e/qwen_checkpoint.h"
#include "e2e/server_process.h"
#include "test_util.h"

namespace densa::testing {
namespace {

using nlohmann::json;

// Runs openai_tools.mjs with 16 requests of each kind against a server on `checkpoint`.
void check_tool_client(const std::string& checkpoint, const std::string& model, const std::string& parser) {
  const std::string dir = prepare_node_project();
  ASSERT_FALSE(dir.empty());
  ServerProcess server({"--served-model-name", model, "--max-running-requests", "32"}, checkpoint);
  ASSERT_TRUE(server.wait_ready());
  int rc = 0;
  const std::string models = run_command("curl -s " + shell_quote(server.url("/v1/models")), &rc);
  EXPECT_NE(models.find("\"densa_tool_parser\":\"" + parser + "\""), std::string::npos) << models;
  const std::string out = run_command("cd " + shell_quote(dir) + " && node openai_tools.mjs " +
                                      shell_quote(server.url("/v1")) + " " + shell_quote(oracles_dir().string()) +
                                      " 16 " + shell_quote(model) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out << "\n" << server.log();
  const json r = json::parse(out.substr(out.find('{')));
  for (const char* mode : {"blocking", "stream"}) {
    const json& l = r["loop"][mode];
    EXPECT_EQ(l["finish"], "tool_calls") << mode << ": " << l.dump();
    EXPECT_EQ(l["calls"], 1) << mode;
    EXPECT_TRUE(l["problems"].empty()) << mode << ": " << l.dump();
    EXPECT_NE(l["final_finish"], "tool_calls") << mode;
    EXPECT_FALSE(l["final_has_calls"].get<bool>()) << mode;
    EXPECT_GT(l["final_prompt_tokens"].get<int>(), 30) << mode;
  }
  EXPECT_EQ(r["required"]["total"], 16);
  EXPECT_EQ(r["required"]["calls"], 16);
  EXPECT_TRUE(r["required"]["problems"].empty()) << r["required"].dump();
  EXPECT_EQ(r["named"]["total"], 16);
  EXPECT_TRUE(r["named"]["problems"].empty()) << r["named"].dump();
  EXPECT_EQ(r["schema"]["total"], 16);
  EXPECT_EQ(r["schema"]["valid"], 16) << r["schema"].dump();
  EXPECT_EQ(r["stream_equal"]["total"], 16);
  EXPECT_EQ(r["stream_equal"]["equal"], 16) << r["stream_equal"].dump();
}

// A random-weight checkpoint carrying the tokenizer directory `tok` (tokenizer + template).
std::string family_checkpoint(const std::filesystem::path& tok, const std::string& name) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / ("densa-e2e-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  int rc = 0;
  const std::string log = run_command(std::string(DENSA_BINARY) +
                                      " gen-model --arch llama --hidden 64 --layers 1 --heads 4 --kv-heads 2 --ffn 128 "
                                      "--max-context 4096 --format hf --dtype bf16 --tokenizer " +
                                      shell_quote(tok.string()) + " " + shell_quote(out.string()) + " 2>&1",
                                      &rc);
  EXPECT_EQ(rc, 0) << log;
  return out.string();
}

TEST(E2eTools, OpenAiClientToolLoopSchemasAndStreamingAgree) {
  check_tool_client(qwen_checkpoint().string(), "qwen-random", "qwen3");
}

TEST(E2eTools, KimiK2FormatToolLoopSchemasAndStreamingAgree) {
  check_tool_client(family_checkpoint(family_tokenizer_dir("kimi_k2"), "kimi"), "kimi-random", "kimi_k2");
}

TEST(E2eTools, Glm45FormatToolLoopSchemasAndStreamingAgree) {
  check_tool_client(family_checkpoint(family_tokenizer_dir("glm45"), "glm"), "glm-random", "glm45");
}

}  // namespace
}  // namespace densa::testing
