// End-to-end: `densa serve --kv-integrity ...` on the MoE fixture, driven over HTTP with curl.
// With tag checks on (and in digest mode) concurrent greedy requests produce exactly the text of
// a server with checks off and no violation is counted; the admin endpoint reports and switches
// the policy at run time; a bad policy is refused at start-up and over HTTP.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <future>
#include <string>
#include <vector>

#include "e2e/server_process.h"
#include "test_util.h"

namespace densa::testing {
namespace {

using nlohmann::json;

// Prometheus sample value of an unlabelled metric; -1 when absent.
double metric(const std::string& text, const std::string& name) {
  const size_t pos = text.find("\n" + name + " ");
  return pos == std::string::npos ? -1.0 : std::atof(text.c_str() + pos + name.size() + 2);
}

std::vector<std::string> prompts() {
  const json golden = read_json(model_dir("tinystories-mixtral-3.6m") / "golden" / "golden.json");
  std::vector<std::string> out;
  for (const json& p : golden["prompts"]) out.push_back(p["prompt"].get<std::string>());
  return out;
}

// Greedy completions of every prompt, sent concurrently (8 at once: two rounds of the prompts).
std::vector<std::string> greedy_texts(const ServerProcess& server) {
  const auto ps = prompts();
  std::vector<std::future<std::string>> futures;
  for (int round = 0; round < 2; ++round) {
    for (const std::string& p : ps) {
      futures.push_back(std::async(std::launch::async, [&server, p] {
        const json body = {{"prompt", p}, {"max_tokens", 40}, {"temperature", 0}};
        const CurlResponse r = server.post("/v1/completions", body.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        const json j = json::parse(r.body, nullptr, false);
        return j.is_object() && j.contains("choices") ? j["choices"][0]["text"].get<std::string>() : std::string("<error>");
      }));
    }
  }
  std::vector<std::string> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

TEST(ServeIntegrityE2e, TagAndDigestChecksLeaveOutputsUnchanged) {
  ServerProcess off({"--kv-integrity", "off"});
  ASSERT_TRUE(off.wait_ready());
  const auto reference = greedy_texts(off);
  EXPECT_EQ(off.stop(), 0);
  ASSERT_FALSE(reference.empty());
  for (const std::string& t : reference) EXPECT_NE(t, "<error>");

  for (const char* mode : {"on", "digest=1"}) {
    ServerProcess server({"--kv-integrity", mode});
    ASSERT_TRUE(server.wait_ready()) << mode;
    EXPECT_EQ(greedy_texts(server), reference) << "--kv-integrity " << mode;
    const std::string m = server.get("/metrics").body;
    EXPECT_EQ(metric(m, "densa_kv_integrity_violations_total"), 0.0) << m;
    const CurlResponse health = server.get("/health?audit=1");
    EXPECT_EQ(health.status, 200) << health.body;
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
}

TEST(ServeIntegrityE2e, AdminEndpointReportsAndSwitchesThePolicy) {
  ServerProcess server({"--kv-integrity", "sample=3"});
  ASSERT_TRUE(server.wait_ready());
  CurlResponse r = server.get("/admin/kv-integrity");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["mode"], "sample=3");

  r = server.post("/admin/kv-integrity", R"({"mode":"on"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(server.get("/admin/kv-integrity").body)["mode"], "on");

  // Refused switches leave the policy as it was.
  for (const char* bad : {R"({"mode":"sometimes"})", R"({"mode":"sample=0"})", R"({"mode":3})", "not json"}) {
    r = server.post("/admin/kv-integrity", bad);
    EXPECT_EQ(r.status, 400) << bad << " -> " << r.body;
    const json err = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(err.is_object()) << r.body;
    EXPECT_TRUE(err.contains("error")) << r.body;
  }
  EXPECT_EQ(json::parse(server.get("/admin/kv-integrity").body)["mode"], "on");

  // Requests still complete after the switch, and the per-request override parses.
  r = server.post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":8,"temperature":0,"densa_kv_integrity":false})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// densa_inject_fault (bench/soak.sh's faults): served only with --test-allow-fault-injection;
// there the asking request fails with the violation's code, and the server goes on answering.
TEST(ServeIntegrityE2e, RequestAskedFaultsFailThatRequestOnlyWhereAllowed) {
  const std::string prompt = prompts().front() + " " + prompts().back();  // more than one 16-token page
  const auto body = [&](const char* fault) {
    json b = {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
    if (fault != nullptr) b["densa_inject_fault"] = fault;
    return b.dump();
  };
  {
    ServerProcess plain({"--kv-integrity", "on"});
    ASSERT_TRUE(plain.wait_ready());
    const CurlResponse r = plain.post("/v1/completions", body("late-write"));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "densa_inject_fault") << r.body;
    EXPECT_EQ(plain.stop(), 0) << plain.log();
  }
  ServerProcess server({"--kv-integrity", "digest", "--test-allow-fault-injection"});
  ASSERT_TRUE(server.wait_ready());
  const auto text = [&](const CurlResponse& r) {
    const json j = json::parse(r.body, nullptr, false);
    return r.status == 200 && j.is_object() ? j["choices"][0]["text"].get<std::string>() : "<" + r.body + ">";
  };
  const std::string want = text(server.post("/v1/completions", body(nullptr)));
  ASSERT_NE(want.substr(0, 1), "<") << want;
  for (const char* fault : {"late-write", "off-by-one", "bit-flip"}) {  // the kinds one request alone fits
    const CurlResponse r = server.post("/v1/completions", body(fault));
    EXPECT_EQ(r.status, 500) << fault << ": " << r.body;
    const json err = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(err.is_object()) << r.body;
    EXPECT_EQ(err["error"]["code"], "kv_integrity_violation") << fault << ": " << r.body;
    EXPECT_EQ(text(server.post("/v1/completions", body(nullptr))), want) << "after " << fault;
  }
  EXPECT_EQ(metric(server.get("/metrics").body, "densa_kv_integrity_violations_total"), 3.0);
  const CurlResponse health = server.get("/health?audit=1");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(ServeIntegrityE2e, BadPolicyIsRefusedAtStartup) {
  int rc = 0;
  const std::string out = run_command(std::string(DENSA_BINARY) + " serve -m " + shell_quote(fixture_model_path()) +
                                          " --port 1 --kv-integrity sometimes 2>&1",
                                      &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--kv-integrity"), std::string::npos) << out;
}

}  // namespace
}  // namespace densa::testing
