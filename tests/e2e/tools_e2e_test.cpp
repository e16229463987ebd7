// Tool calls and structured outputs end to end with the official `openai` client
// (tests/e2e/openai_tools.mjs) against `densa serve` on a random-weight checkpoint with
// Qwen3's tokenizer and template: the full tool loop streaming and not; under tool_choice
// required / named and response_format json_schema at temperature 1 every answer parses and
// validates against its schema with ajv (an independent validator); streamed answers fold to
// the non-streamed ones of the same seed, many requests at once.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/node_project.h"
#include "e2e/qwen_checkpoint.h"
#include "e2e/server_process.h"
#include "test_util.h"

namespace densa::testing {
namespace {

using nlohmann::json;

TEST(E2eTools, OpenAiClientToolLoopSchemasAndStreamingAgree) {
  const std::string dir = prepare_node_project();
  ASSERT_FALSE(dir.empty());
  ServerProcess server({"--served-model-name", "qwen-random", "--max-running-requests", "32"}, qwen_checkpoint().string());
  ASSERT_TRUE(server.wait_ready());
  int rc = 0;
  const std::string out = run_command("cd " + shell_quote(dir) + " && node openai_tools.mjs " +
                                      shell_quote(server.url("/v1")) + " " + shell_quote(oracles_dir().string()) +
                                      " 16 2>&1", &rc);
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

}  // namespace
}  // namespace densa::testing
