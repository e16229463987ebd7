// End-to-end: the real `densa serve` driven by the official `openai` npm package
// (tests/e2e/package.json, pinned by package-lock.json, installed with `npm ci` into the
// build directory on first use). Fails, never skips, when node or npm is missing.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "e2e/server_process.h"
#include "test_util.h"

namespace densa::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Copies the client project next to the densa binary and runs `npm ci` unless the installed
// lock file is already the same. Returns the directory, or "" after recording a failure.
std::string prepare_node_project() {
  int rc = 0;
  run_command("node --version >/dev/null 2>&1", &rc);
  if (rc != 0) {
    ADD_FAILURE() << "node is not installed (scripts/install-deps.sh installs nodejs and npm)";
    return {};
  }
  run_command("npm --version >/dev/null 2>&1", &rc);
  if (rc != 0) {
    ADD_FAILURE() << "npm is not installed (scripts/install-deps.sh installs nodejs and npm)";
    return {};
  }
  const fs::path src = fs::path(DENSA_SOURCE_DIR) / "tests" / "e2e";
  const fs::path dir = fs::path(DENSA_BINARY).parent_path() / "e2e-node";
  fs::create_directories(dir);
  for (const char* f : {"package.json", "openai_client.mjs"})
    fs::copy_file(src / f, dir / f, fs::copy_options::overwrite_existing);
  const std::string lock = read_text(src / "package-lock.json");
  const bool installed = fs::exists(dir / "node_modules" / "openai" / "package.json") &&
                         read_text(dir / "package-lock.json") == lock;
  if (!installed) {
    fs::copy_file(src / "package-lock.json", dir / "package-lock.json", fs::copy_options::overwrite_existing);
    const std::string log = run_command("cd " + shell_quote(dir.string()) + " && npm ci --no-audit --no-fund 2>&1", &rc);
    if (rc != 0) {
      ADD_FAILURE() << "npm ci failed in " << dir << ":\n" << log;
      return {};
    }
  }
  return dir.string();
}

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
