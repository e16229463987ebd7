// Disaggregated serving end to end: the real `densa router` in front of real
// `densa serve --role prefill` and `--role decode` processes on the MoE fixture, KV moving
// over UCX (tcp), driven over HTTP. Greedy answers equal a colocated server's; a prefill
// worker or a decode worker killed with SIGKILL mid-request gives the documented outcome
// (src/router/README.md), the other requests succeed, the survivors' audits are clean and
// nothing hangs (every wait is bounded).
#include <gtest/gtest.h>

#include <cstdlib>
#include <future>

#include <nlohmann/json.hpp>

#include "router/densa_process.h"
#include "router/router_harness.h"

namespace densa::testing {
namespace {

using nlohmann::json;
using router::testing::eventually;
using router::testing::StreamingRequest;

std::string body_of(const std::string& prompt, int max_tokens, bool stream) {
  return json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}}.dump();
}

std::string text_of(const CurlResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  if (r.status != 200 || j.is_discarded() || !j.contains("choices")) return {};
  return j["choices"][0]["text"];
}

std::string streamed_text_of(const CurlResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  const std::vector<std::string> payloads = sse_payloads(r.body);
  EXPECT_FALSE(payloads.empty());
  if (payloads.empty()) return {};
  EXPECT_EQ(payloads.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const json c = json::parse(payloads[i]);
    EXPECT_FALSE(c.contains("error")) << payloads[i];
    if (c.contains("choices"))
      for (const json& ch : c["choices"]) text += ch["text"].get<std::string>();
  }
  return text;
}

double metric(const std::string& text, const std::string& sample) {
  const size_t at = text.find("\n" + sample + " ");
  return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + sample.size() + 2);
}

// No request left behind, no page astray (waits for in-flight cleanups to finish).
void expect_idle_and_audit_clean(const DensaProcess& s) {
  json h;
  EXPECT_TRUE(eventually([&] {
    const CurlResponse r = s.get("/health?audit=1");
    h = json::parse(r.body, nullptr, false);
    return r.status == 200 && h.value("audit", "") == "ok" && h.value("kv_pages_used", -1) == 0 &&
           h.value("requests_running", -1) == 0;
  })) << s.url() << ": " << h.dump();
}

const char* const kPrompts[] = {"Once upon a time, there was a little girl named Lily. She loved to play outside",
                                "Tom had a big red ball. One day he went to the park with his mom and",
                                "The sun was shining and the birds were singing. A small dog",
                                "Once upon a time"};
constexpr int kMaxTokens = 24;

// A prefill worker that holds converted pages this long before sending them (the worker's
// fault knob), so a test can kill something mid-transfer.
std::unique_ptr<DensaProcess> start_slow_prefill(int delay_ms) {
  setenv("DENSA_DISAGG_SEND_DELAY_MS", std::to_string(delay_ms).c_str(), 1);
  std::unique_ptr<DensaProcess> p = start_serve({"--served-model-name", "tiny-moe", "--role", "prefill"});
  unsetenv("DENSA_DISAGG_SEND_DELAY_MS");
  return p;
}

class RouterDisagg : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("UCX_TLS", "tcp", 1);  // inherited by the workers: KV over TCP sockets
    colocated_ = start_serve({"--served-model-name", "tiny-moe"}).release();
    for (auto** p : {&prefill1_, &prefill2_})
      *p = start_serve({"--served-model-name", "tiny-moe", "--role", "prefill"}).release();
    for (auto** d : {&decode1_, &decode2_})
      *d = start_serve({"--served-model-name", "tiny-moe", "--role", "decode", "--disagg-timeout-ms", "20000"}).release();
    ready_ = colocated_->wait_ready() && prefill1_->wait_ready() && prefill2_->wait_ready() && decode1_->wait_ready() &&
             decode2_->wait_ready();
    if (!ready_) return;
    router_ = start_router({prefill1_->url(), prefill2_->url()}, {decode1_->url(), decode2_->url()},
                           {"--health-interval-ms", "200"})
                  .release();
    ready_ = router_->wait_ready();
    for (const char* p : kPrompts) expected_.push_back(text_of(colocated_->post("/v1/completions", body_of(p, kMaxTokens, false))));
  }
  static void TearDownTestSuite() {
    if (router_) {
      EXPECT_EQ(router_->stop(), 0) << router_->log();
    }
    for (DensaProcess* s : {decode1_, decode2_, prefill1_, prefill2_}) expect_idle_and_audit_clean(*s);
    for (DensaProcess* s : {router_, decode1_, decode2_, prefill1_, prefill2_, colocated_}) delete s;
    router_ = decode1_ = decode2_ = prefill1_ = prefill2_ = colocated_ = nullptr;
    unsetenv("UCX_TLS");
  }
  void SetUp() override { ASSERT_TRUE(ready_); }

  static inline DensaProcess* colocated_ = nullptr;
  static inline DensaProcess* prefill1_ = nullptr;
  static inline DensaProcess* prefill2_ = nullptr;
  static inline DensaProcess* decode1_ = nullptr;
  static inline DensaProcess* decode2_ = nullptr;
  static inline DensaProcess* router_ = nullptr;
  static inline bool ready_ = false;
  static inline std::vector<std::string> expected_;
};

TEST_F(RouterDisagg, ConcurrentGreedyRequestsEqualColocatedStreamedOrNot) {
  std::vector<std::future<std::string>> results;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < std::size(kPrompts); ++i)
      results.push_back(std::async(std::launch::async, [i, round] {
        const CurlResponse r = router_->post("/v1/completions", body_of(kPrompts[i], kMaxTokens, round == 1));
        return round == 1 ? streamed_text_of(r) : text_of(r);
      }));
  for (size_t k = 0; k < results.size(); ++k) EXPECT_EQ(results[k].get(), expected_[k % std::size(kPrompts)]) << k;
  // Every worker took part: KV went out of both prefill workers and into both decode workers.
  for (DensaProcess* w : {prefill1_, prefill2_, decode1_, decode2_})
    EXPECT_GT(metric(w->get("/metrics").body, "densa_kv_transfer_bytes_total"), 0) << w->url();
  const std::string m = router_->get("/metrics").body;
  EXPECT_EQ(metric(m, "densa_router_retries_total"), 0);
  EXPECT_EQ(metric(m, "densa_router_responses_total{code=\"2xx\"}"), 8);
}

TEST_F(RouterDisagg, ChatEqualsColocated) {
  const std::string chat = json{{"messages", {{{"role", "user"}, {"content", "Tell me a story about a cat."}}}},
                                {"max_tokens", 20},
                                {"temperature", 0}}
                               .dump();
  const CurlResponse ref = colocated_->post("/v1/chat/completions", chat);
  const CurlResponse got = router_->post("/v1/chat/completions", chat);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(json::parse(got.body)["choices"][0]["message"], json::parse(ref.body)["choices"][0]["message"]);
}

TEST_F(RouterDisagg, PrefillWorkerKilledMidTransferIsRetriedOnTheOtherPrefill) {
  std::unique_ptr<DensaProcess> slow = start_slow_prefill(3000);
  ASSERT_TRUE(slow->wait_ready());
  // The slow worker is first in order: the first request goes to it, the second (it then
  // carries load) to prefill1.
  std::unique_ptr<DensaProcess> router =
      start_router({slow->url(), prefill1_->url()}, {decode1_->url()},
                   {"--health-interval-ms", "600000", "--failure-hold-ms", "600000"});
  ASSERT_TRUE(router->wait_ready());
  auto affected = std::async(std::launch::async, [&] {
    return text_of(router->post("/v1/completions", body_of(kPrompts[0], kMaxTokens, false)));
  });
  ASSERT_TRUE(eventually([&] { return json::parse(router->get("/health").body)["prefill"][0]["requests_in_flight"] == 1; }));
  auto other = std::async(std::launch::async, [&] {
    return streamed_text_of(router->post("/v1/completions", body_of(kPrompts[1], kMaxTokens, true)));
  });
  // The decode worker has reserved pages and asked the slow prefill worker, which holds them.
  ASSERT_TRUE(eventually([&] {
    return metric(slow->get("/metrics").body, "densa_requests_finished_total") >= 1 ||
           json::parse(slow->get("/health").body).value("requests_running", 0) >= 1;
  }));
  slow->kill9();
  // The decode worker reports kv_transfer_failed before its first byte: the router retries
  // on prefill1 and the client never sees the failure.
  EXPECT_EQ(affected.get(), expected_[0]);
  EXPECT_EQ(other.get(), expected_[1]);
  const std::string m = router->get("/metrics").body;
  EXPECT_EQ(metric(m, "densa_router_retries_total"), 1) << m;
  const json health = json::parse(router->get("/health").body);
  EXPECT_EQ(health["prefill"][0]["healthy"], false);
  EXPECT_GE(metric(decode1_->get("/metrics").body, "densa_kv_transfer_failures_total"), 1);
  expect_idle_and_audit_clean(*decode1_);
  expect_idle_and_audit_clean(*prefill1_);
  EXPECT_EQ(router->stop(), 0);
}

TEST_F(RouterDisagg, DecodeWorkerKilledAfterTheFirstByteEndsTheStreamWithAnErrorEvent) {
  std::unique_ptr<DensaProcess> slow = start_slow_prefill(3000);
  std::unique_ptr<DensaProcess> doomed =
      start_serve({"--served-model-name", "tiny-moe", "--role", "decode", "--disagg-timeout-ms", "20000"});
  ASSERT_TRUE(slow->wait_ready() && doomed->wait_ready());
  std::unique_ptr<DensaProcess> router =
      start_router({slow->url()}, {doomed->url(), decode2_->url()},
                   {"--health-interval-ms", "600000", "--failure-hold-ms", "600000"});
  ASSERT_TRUE(router->wait_ready());
  // A streamed chat goes to the doomed decode worker (first in order). Its first event (the
  // assistant role) reaches the client before the KV does: the client is committed.
  const std::string chat = json{{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                                {"max_tokens", 16},
                                {"temperature", 0},
                                {"stream", true}}
                               .dump();
  StreamingRequest affected(router->port(), "/v1/chat/completions", chat);
  ASSERT_TRUE(eventually([&] { return affected.num_events() >= 1; }));
  // Another request, on the surviving decode worker.
  auto other = std::async(std::launch::async, [&] {
    return text_of(router->post("/v1/completions", body_of(kPrompts[2], kMaxTokens, false)));
  });
  ASSERT_TRUE(eventually([&] { return json::parse(router->get("/health").body)["decode"][1]["requests_in_flight"] == 1; }));
  doomed->kill9();
  affected.join();
  const std::vector<std::string> events = affected.events();
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json err = json::parse(events[events.size() - 2]);
  EXPECT_EQ(err["error"]["code"], "upstream_failed") << err.dump();
  EXPECT_EQ(other.get(), expected_[2]);
  const std::string m = router->get("/metrics").body;
  EXPECT_EQ(metric(m, "densa_router_stream_failures_total"), 1) << m;
  EXPECT_EQ(json::parse(router->get("/health").body)["decode"][0]["healthy"], false);
  expect_idle_and_audit_clean(*decode2_);
  expect_idle_and_audit_clean(*slow);  // the export to the dead decode worker was unpinned
  EXPECT_EQ(router->stop(), 0);
}

}  // namespace
}  // namespace densa::testing
