// End-to-end: the real `densa serve` driven by the official `openai` npm package
// (tests/e2e/package.json, pinned by package-lock.json, installed with `npm ci` into the
// build directory on first use). Fails, never skips, when node or npm is missing.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "e2e/node_project.h"
#include "e2e/server_process.h"
#include "test_util.h"

namespace densa::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

TEST(E2eOpenAiNpm, OfficialClientCompletionsChatStreamingErrors) {
  const std::string dir = prepare_node_project();
  ASSERT_FALSE(dir.empty());
  ServerProcess server({"--api-key", "test-key", "--served-model-name", "tiny-moe"});
  ASSERT_TRUE(server.wait_ready());

  const json golden = read_json(model_dir("tinystories-mixtral-3.6m") / "golden" / "golden.json")["prompts"][0];
  const std::string prompt = golden["prompt"];
  int rc = 0;
  const std::string out = run_command("cd " + shell_quote(dir) + " && node openai_client.mjs " +
                                          shell_quote(server.url("/v1")) + " tiny-moe test-key " + shell_quote(prompt),
                                      &rc);
  ASSERT_EQ(rc, 0) << "node client failed:\n" << out << "\nserver log:\n" << server.log();
  const json r = json::parse(out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << out;

  EXPECT_EQ(r["completion"]["text"], golden["continuation_text"]);
  EXPECT_EQ(r["completion"]["finish_reason"], "length");
  EXPECT_EQ(r["completion"]["usage"]["completion_tokens"], 48);
  EXPECT_EQ(r["completion"]["usage"]["prompt_tokens"], golden["prompt_ids"].size());
  EXPECT_EQ(r["completion_stream"]["text"], golden["continuation_text"]);
  EXPECT_EQ(r["completion_stream"]["finish_reason"], "length");
  EXPECT_EQ(r["completion_stream"]["usage"]["completion_tokens"], 48);
  EXPECT_GT(r["completion_stream"]["chunks"].get<int>(), 2);

  EXPECT_EQ(r["chat"]["role"], "assistant");
  EXPECT_FALSE(r["chat"]["content"].get<std::string>().empty());
  EXPECT_EQ(r["chat"]["logprobs_len"], r["chat"]["usage"]["completion_tokens"]);
  EXPECT_EQ(r["chat_stream"]["role"], "assistant");
  EXPECT_EQ(r["chat_stream"]["content"], r["chat"]["content"]);
  EXPECT_EQ(r["chat_stream"]["finish_reason"], r["chat"]["finish_reason"]);

  EXPECT_EQ(r["error_bad_max_tokens"]["status"], 400);
  EXPECT_EQ(r["error_bad_max_tokens"]["name"], "BadRequestError");
  EXPECT_EQ(r["error_bad_max_tokens"]["param"], "max_tokens");
  EXPECT_EQ(r["error_unknown_model"]["status"], 404);
  EXPECT_EQ(r["error_unknown_model"]["code"], "model_not_found");
  EXPECT_EQ(r["error_bad_key"]["status"], 401);
  EXPECT_EQ(r["error_bad_key"]["name"], "AuthenticationError");
  EXPECT_FALSE(r["after_errors"].get<std::string>().empty());
  EXPECT_EQ(r["models"], json::array({"tiny-moe"}));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace densa::testing
