// The real `densa router` binary in front of real colocated `densa serve` processes (role
// both ignores X-Densa-Prefill-Url, so each serves as prefill and decode), driven with curl:
// answers equal the servers' own, requests rotate over the workers, a worker killed after
// the router probed it is retried around, and the CLI fails cleanly on bad flags.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "router/densa_process.h"
#include "test_util.h"

namespace densa::testing {
namespace {

using nlohmann::json;

std::string completion_body(const std::string& prompt, int max_tokens, bool stream) {
  return json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}}.dump();
}

// Text of a non-streamed completion (or chat) answer; empty with a test failure otherwise.
std::string answer_text(const CurlResponse& r, bool chat = false) {
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  if (r.status != 200 || j.is_discarded() || !j.contains("choices")) return {};
  return chat ? j["choices"][0]["message"]["content"].get<std::string>() : j["choices"][0]["text"].get<std::string>();
}

// Text of a streamed completion; checks it ends with [DONE] and carries no error.
std::string streamed_text(const CurlResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  const std::vector<std::string> payloads = sse_payloads(r.body);
  if (payloads.empty()) return {};
  EXPECT_EQ(payloads.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const json c = json::parse(payloads[i]);
    EXPECT_FALSE(c.contains("error")) << payloads[i];
    for (const json& ch : c["choices"]) text += ch["text"].get<std::string>();
  }
  return text;
}

double metric(const std::string& text, const std::string& sample) {
  const size_t at = text.find("\n" + sample + " ");
  return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + sample.size() + 2);
}

double ok_responses(const DensaProcess& server) {
  return metric(server.get("/metrics").body, "densa_http_responses_total{code=\"2xx\"}");
}

const char* const kPrompts[] = {"Once upon a time, there was a little girl named Lily.",
                                "The dog ran to the park and", "Tom and his mom went to the store. They saw",
                                "One day, a big red ball"};

class RouterServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    a_ = start_serve({"--served-model-name", "tiny-moe"}).release();
    b_ = start_serve({"--served-model-name", "tiny-moe"}).release();
    ready_ = a_->wait_ready() && b_->wait_ready();
    if (!ready_) return;
    router_ = start_router({a_->url(), b_->url()}, {a_->url(), b_->url()}, {"--health-interval-ms", "200"}).release();
    ready_ = router_->wait_ready();
  }
  static void TearDownTestSuite() {
    if (router_) {
      EXPECT_EQ(router_->stop(), 0) << "router did not exit cleanly on SIGTERM:\n" << router_->log();
    }
    for (DensaProcess* s : {a_, b_}) {
      // Nothing the router did may leave a request behind or a page astray.
      const CurlResponse audit = s->get("/health?audit=1");
      EXPECT_EQ(audit.status, 200) << audit.body;
      const json h = json::parse(audit.body, nullptr, false);
      EXPECT_EQ(h.value("audit", ""), "ok") << audit.body;
      EXPECT_EQ(s->stop(), 0);
    }
    delete router_;
    delete a_;
    delete b_;
    router_ = a_ = b_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(ready_); }

  static DensaProcess* a_;
  static DensaProcess* b_;
  static DensaProcess* router_;
  static bool ready_;
};
DensaProcess* RouterServe::a_ = nullptr;
DensaProcess* RouterServe::b_ = nullptr;
DensaProcess* RouterServe::router_ = nullptr;
bool RouterServe::ready_ = false;

TEST_F(RouterServe, GreedyAnswersEqualTheServersOwnStreamedOrNot) {
  for (const char* prompt : {kPrompts[0], kPrompts[2]}) {
    const std::string direct = answer_text(a_->post("/v1/completions", completion_body(prompt, 24, false)));
    ASSERT_FALSE(direct.empty());
    EXPECT_EQ(answer_text(router_->post("/v1/completions", completion_body(prompt, 24, false))), direct) << prompt;
    EXPECT_EQ(streamed_text(router_->post("/v1/completions", completion_body(prompt, 24, true))), direct) << prompt;
  }
  const std::string chat = json{{"messages", {{{"role", "user"}, {"content", "Tell me about a cat."}}}},
                                {"max_tokens", 20},
                                {"temperature", 0}}
                               .dump();
  const std::string direct = answer_text(a_->post("/v1/chat/completions", chat), true);
  ASSERT_FALSE(direct.empty());
  EXPECT_EQ(answer_text(router_->post("/v1/chat/completions", chat), true), direct);
}

TEST_F(RouterServe, ConcurrentRequestsAllGetTheirOwnAnswer) {
  std::vector<std::string> expected;
  for (const char* prompt : kPrompts) expected.push_back(answer_text(b_->post("/v1/completions", completion_body(prompt, 32, false))));
  std::vector<std::future<std::string>> results;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < std::size(kPrompts); ++i)
      results.push_back(std::async(std::launch::async, [i, round] {
        const std::string body = completion_body(kPrompts[i], 32, round == 1);
        const CurlResponse r = router_->post("/v1/completions", body);
        return round == 1 ? streamed_text(r) : answer_text(r);
      }));
  for (size_t k = 0; k < results.size(); ++k) EXPECT_EQ(results[k].get(), expected[k % std::size(kPrompts)]) << k;
}

TEST_F(RouterServe, SequentialRequestsRotateOverTheDecodeWorkers) {
  const double a0 = ok_responses(*a_), b0 = ok_responses(*b_);
  for (int i = 0; i < 4; ++i) answer_text(router_->post("/v1/completions", completion_body(kPrompts[i], 4, false)));
  // Every pick is a tie (nothing else in flight), so the decode workers take turns.
  EXPECT_EQ(ok_responses(*a_) - a0, 2);
  EXPECT_EQ(ok_responses(*b_) - b0, 2);
}

TEST_F(RouterServe, ModelsHealthAndMetrics) {
  const CurlResponse models = router_->get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "tiny-moe");
  const json health = json::parse(router_->get("/health").body);
  EXPECT_EQ(health["status"], "ok");
  ASSERT_EQ(health["decode"].size(), 2u);
  EXPECT_EQ(health["decode"][1]["url"], b_->url());
  EXPECT_EQ(health["decode"][1]["healthy"], true);
  // One request of its own, so the counter is checked whatever ran before in this process.
  const CurlResponse r = router_->post("/v1/completions", completion_body(kPrompts[0], 4, false));
  EXPECT_EQ(r.status, 200) << r.body;
  const std::string m = router_->get("/metrics").body;
  EXPECT_GT(metric(m, "densa_router_requests_total"), 0);
  EXPECT_EQ(metric(m, "densa_router_worker_requests_in_flight{role=\"decode\",url=\"" + a_->url() + "\"}"), 0);
}

TEST_F(RouterServe, AWorkerKilledAfterTheProbeIsRetriedAroundAndMarked) {
  std::unique_ptr<DensaProcess> doomed = start_serve();
  ASSERT_TRUE(doomed->wait_ready());
  // Long probe interval and hold: only the failed request can find out the worker is gone.
  std::unique_ptr<DensaProcess> router =
      start_router({a_->url()}, {doomed->url(), b_->url()},
                   {"--health-interval-ms", "600000", "--failure-hold-ms", "600000", "--max-retries", "1"});
  ASSERT_TRUE(router->wait_ready());
  // Ready means one healthy worker per role; this test needs both decode workers in (a probe
  // lost at start-up on a loaded machine is asked again within a second).
  bool both = false;
  for (int i = 0; i < 100 && !both; ++i) {
    const json h = json::parse(router->get("/health").body);
    both = h["decode"][0]["healthy"] == true && h["decode"][1]["healthy"] == true;
    if (!both) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(both) << router->get("/health").body;
  doomed->kill9();
  const std::string expected = answer_text(b_->post("/v1/completions", completion_body(kPrompts[0], 16, false)));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(answer_text(router->post("/v1/completions", completion_body(kPrompts[0], 16, false))), expected);
    EXPECT_EQ(streamed_text(router->post("/v1/completions", completion_body(kPrompts[0], 16, true))), expected);
  }
  const std::string m = router->get("/metrics").body;
  EXPECT_EQ(metric(m, "densa_router_retries_total"), 1);  // the first request found it dead; then it was out
  const json health = json::parse(router->get("/health").body);
  EXPECT_EQ(health["decode"][0]["healthy"], false);
  EXPECT_EQ(health["decode"][0]["failures"], 1);
  EXPECT_EQ(router->get("/health").status, 200);  // b is still there
  EXPECT_EQ(router->stop(), 0);
}

TEST_F(RouterServe, ClosedPortsAreUnhealthyFromTheStartAnd503WhenNoDecodeIsLeft) {
  const std::string closed = "http://127.0.0.1:" + std::to_string(free_port());
  std::unique_ptr<DensaProcess> router = start_router({a_->url()}, {closed}, {"--health-interval-ms", "100"});
  ASSERT_TRUE(router->wait_ready(503));
  const json health = json::parse(router->get("/health").body);
  EXPECT_EQ(health["status"], "unavailable");
  EXPECT_EQ(health["decode"][0]["healthy"], false);
  EXPECT_NE(health["decode"][0]["error"].get<std::string>().find("GET /health"), std::string::npos) << health.dump();
  const CurlResponse r = router->post("/v1/completions", completion_body("Hi", 4, false));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "no_healthy_worker");
  EXPECT_EQ(router->stop(), 0);
}

TEST_F(RouterServe, CliRejectsBadWorkerListsWithOneLine) {
  int code = 0;
  const std::string out = run_command(std::string(DENSA_BINARY) + " router --prefill localhost:1 --decode http://a:2 2>&1",
                                      &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--prefill: worker URL 'localhost:1' must start with http://"), std::string::npos) << out;
  run_command(std::string(DENSA_BINARY) + " router --prefill http://a:1 2>&1", &code);
  EXPECT_NE(code, 0);
}

}  // namespace
}  // namespace densa::testing
