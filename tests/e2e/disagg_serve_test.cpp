// End-to-end disaggregation: a real `densa serve --role prefill` and `--role decode` pair on
// the MoE fixture, KV moving between them over UCX (tcp), driven over HTTP with curl, against
// a colocated `densa serve` for the reference outputs.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <future>
#include <thread>

#include "e2e/server_process.h"

namespace densa::testing {
namespace {

using nlohmann::json;

double metric_value(const std::string& text, const std::string& name) {
  const size_t pos = text.find("\n" + name + " ");
  return pos == std::string::npos ? -1.0 : std::atof(text.c_str() + pos + name.size() + 2);
}

std::string streamed_text(const std::string& body) {
  std::string text;
  for (const std::string& p : sse_payloads(body)) {
    if (p == "[DONE]") break;
    const json c = json::parse(p);
    EXPECT_FALSE(c.contains("error")) << p;
    for (const json& ch : c["choices"]) {
      if (ch.contains("text")) text += ch["text"].get<std::string>();
      if (ch.contains("delta") && ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    }
  }
  return text;
}

class DisaggServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("UCX_TLS", "tcp", 1);  // the children inherit it: KV over TCP sockets
    colocated_ = new ServerProcess({"--served-model-name", "tiny-moe"});
    prefill_ = new ServerProcess({"--served-model-name", "tiny-moe", "--role", "prefill"});
    decode_ = new ServerProcess({"--served-model-name", "tiny-moe", "--role", "decode"});
    decode_fp8_ = new ServerProcess(
        {"--served-model-name", "tiny-moe", "--role", "decode", "--kv-dtype", "fp8", "--weight-dtype", "int4"});
    decode_paged8_ = new ServerProcess({"--served-model-name", "tiny-moe", "--role", "decode", "--page-size", "8",
                                        "--disagg-timeout-ms", "5000"});
    decode_static_ = new ServerProcess({"--served-model-name", "tiny-moe", "--role", "decode", "--kv-dtype", "fp8",
                                        "--kv-scales", "calibrate"});
    decode_unpooled_ =
        new ServerProcess({"--served-model-name", "tiny-moe", "--role", "decode", "--disagg-ucx-workers", "0"});
    ready_ = colocated_->wait_ready() && prefill_->wait_ready() && decode_->wait_ready() &&
             decode_fp8_->wait_ready() && decode_paged8_->wait_ready() && decode_static_->wait_ready() &&
             decode_unpooled_->wait_ready();
  }
  static void TearDownTestSuite() {
    for (ServerProcess* s : {decode_unpooled_, decode_static_, decode_paged8_, decode_fp8_, decode_, prefill_, colocated_}) {
      EXPECT_EQ(s->stop(), 0) << "densa serve did not exit cleanly:\n" << s->log();
      delete s;
    }
  }
  void SetUp() override { ASSERT_TRUE(ready_); }

  static std::string header() { return "-H " + shell_quote("X-Densa-Prefill-Url: http://127.0.0.1:" + std::to_string(prefill_->port())); }

  static void expect_audit_clean(const ServerProcess& s) {
    const CurlResponse h = s.get("/health?audit=1");
    EXPECT_EQ(h.status, 200) << h.body;
    const json j = json::parse(h.body);
    EXPECT_EQ(j["audit"], "ok");
    EXPECT_EQ(j["kv_pages_used"], 0) << "pages left in use after the requests";
  }

  static inline ServerProcess* colocated_ = nullptr;
  static inline ServerProcess* prefill_ = nullptr;
  static inline ServerProcess* decode_ = nullptr;
  static inline ServerProcess* decode_fp8_ = nullptr;
  static inline ServerProcess* decode_paged8_ = nullptr;
  static inline ServerProcess* decode_static_ = nullptr;
  static inline ServerProcess* decode_unpooled_ = nullptr;
  static inline bool ready_ = false;
};

const char* kPrompts[] = {
    "Once upon a time, there was a little girl named Lily. She loved to play outside",
    "Tom had a big red ball. One day he went to the park with his mom and",
    "The sun was shining and the birds were singing. A small dog",
    "Once",  // one token after BOS: the whole prompt KV is one slot
};

TEST_F(DisaggServe, GreedyCompletionsEqualColocatedTokenForToken) {
  for (const char* prompt : kPrompts) {
    const std::string body =
        json({{"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0}, {"logprobs", 2}}).dump();
    const CurlResponse ref = colocated_->post("/v1/completions", body);
    const CurlResponse got = decode_->post("/v1/completions", body, header());
    ASSERT_EQ(ref.status, 200) << ref.body;
    ASSERT_EQ(got.status, 200) << got.body << decode_->log();
    const json r = json::parse(ref.body), g = json::parse(got.body);
    EXPECT_EQ(g["choices"][0]["text"], r["choices"][0]["text"]) << prompt;
    EXPECT_EQ(g["choices"][0]["logprobs"]["tokens"], r["choices"][0]["logprobs"]["tokens"]);
    EXPECT_EQ(g["choices"][0]["logprobs"]["token_logprobs"], r["choices"][0]["logprobs"]["token_logprobs"])
        << "same KV bytes and the same last-token compute: logprobs are bitwise equal";
    EXPECT_EQ(g["choices"][0]["finish_reason"], r["choices"][0]["finish_reason"]);
    EXPECT_EQ(g["usage"]["prompt_tokens"], r["usage"]["prompt_tokens"]);
    EXPECT_EQ(g["usage"]["completion_tokens"], r["usage"]["completion_tokens"]);
  }
  const std::string metrics = decode_->get("/metrics").body;
  EXPECT_GT(metric_value(metrics, "densa_kv_transfer_bytes_total"), 0.0) << metrics;
  EXPECT_EQ(metric_value(metrics, "densa_kv_transfer_failures_total"), 0.0);
  EXPECT_GE(metric_value(metrics, "densa_tokens_in_flight"), 0.0);
  EXPECT_GT(metric_value(prefill_->get("/metrics").body, "densa_kv_transfer_bytes_total"), 0.0);
  expect_audit_clean(*decode_);
  expect_audit_clean(*prefill_);
}

// --disagg-ucx-workers 0: every transfer on a fresh UCX worker, destroyed afterwards; the
// answers are the same.
TEST_F(DisaggServe, WithoutThePoolEveryTransferGetsAFreshWorker) {
  for (const char* prompt : {kPrompts[0], kPrompts[1]}) {
    const std::string body = json({{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}}).dump();
    const CurlResponse ref = colocated_->post("/v1/completions", body);
    const CurlResponse got = decode_unpooled_->post("/v1/completions", body, header());
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(json::parse(got.body)["choices"][0]["text"], json::parse(ref.body)["choices"][0]["text"]);
  }
  // The worker is released once the prefill worker's answer is in, a moment after the reply.
  std::string metrics;
  for (int i = 0; i < 200; ++i) {
    metrics = decode_unpooled_->get("/metrics").body;
    if (metric_value(metrics, "densa_ucx_workers_discarded_total") >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(metric_value(metrics, "densa_ucx_workers_created_total"), 2.0) << metrics;
  EXPECT_EQ(metric_value(metrics, "densa_ucx_workers_reused_total"), 0.0);
  EXPECT_EQ(metric_value(metrics, "densa_ucx_workers_discarded_total"), 2.0);
  EXPECT_EQ(metric_value(metrics, "densa_ucx_workers_idle"), 0.0);
  expect_audit_clean(*decode_unpooled_);
}

TEST_F(DisaggServe, StreamingChatEqualsColocated) {
  const std::string body = json({{"messages", {{{"role", "user"}, {"content", "Tell me a story about a cat."}}}},
                                 {"max_tokens", 30},
                                 {"temperature", 0},
                                 {"stream", true}})
                               .dump();
  const CurlResponse ref = colocated_->post("/v1/chat/completions", body);
  const CurlResponse got = decode_->post("/v1/chat/completions", body, header());
  ASSERT_EQ(got.status, 200) << got.body;
  const std::string text = streamed_text(got.body);
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text, streamed_text(ref.body));
}

TEST_F(DisaggServe, Bf16PrefillToFp8DecodeConvertsAndHalvesTheWire) {
  const std::string body = json({{"prompt", kPrompts[0]}, {"max_tokens", 24}, {"temperature", 0}}).dump();
  const double before = metric_value(prefill_->get("/metrics").body, "densa_kv_transfer_bytes_total");
  const CurlResponse got = decode_fp8_->post("/v1/completions", body, header());
  ASSERT_EQ(got.status, 200) << got.body << decode_fp8_->log();
  EXPECT_FALSE(json::parse(got.body)["choices"][0]["text"].get<std::string>().empty());
  const double fp8_bytes = metric_value(prefill_->get("/metrics").body, "densa_kv_transfer_bytes_total") - before;
  const CurlResponse same = decode_->post("/v1/completions", body, header());
  ASSERT_EQ(same.status, 200);
  const double bf16_bytes =
      metric_value(prefill_->get("/metrics").body, "densa_kv_transfer_bytes_total") - before - fp8_bytes;
  // fp8 dynamic pages: 1 byte per element + 4 bytes of scale per 16-element row = 0.625x bf16.
  EXPECT_LT(fp8_bytes, 0.7 * bf16_bytes) << fp8_bytes << " vs " << bf16_bytes;
  const json layout = json::parse(decode_fp8_->get("/disagg/v1/layout").body);
  EXPECT_EQ(layout["dtype"], "fp8_e4m3");
  EXPECT_EQ(layout["scale_mode"], "dynamic");
  EXPECT_EQ(layout["role"], "decode");
  expect_audit_clean(*decode_fp8_);
}

TEST_F(DisaggServe, StaticFp8DecodeGetsPagesConvertedWithItsCalibratedScales) {
  EXPECT_NE(decode_static_->log().find("kv cache: fp8_e4m3, static scales from calibration"), std::string::npos)
      << decode_static_->log();
  const json layout = json::parse(decode_static_->get("/disagg/v1/layout").body);
  EXPECT_EQ(layout["scale_mode"], "static");
  EXPECT_EQ(layout["static_scales"].size(), 4u * 2 * 4) << "one per layer, k|v, kv head";
  const std::string body = json({{"prompt", kPrompts[1]}, {"max_tokens", 16}, {"temperature", 0}}).dump();
  const double before = metric_value(decode_static_->get("/metrics").body, "densa_kv_transfer_bytes_total");
  const CurlResponse r = decode_static_->post("/v1/completions", body, header());
  ASSERT_EQ(r.status, 200) << r.body << decode_static_->log();
  EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 16);
  const json prefill_layout = json::parse(prefill_->get("/disagg/v1/layout").body);
  const double pages = metric_value(decode_static_->get("/metrics").body, "densa_kv_transfer_bytes_total") - before;
  // Every page on the wire is a static fp8 page: half the bf16 page plus the 48-byte header.
  const double page_msg = prefill_layout["page_bytes"].get<double>() / 2 + 48;
  EXPECT_GT(pages, 0);
  EXPECT_EQ(std::fmod(pages, page_msg), 0.0) << pages << " bytes is not a whole number of static fp8 pages";
  expect_audit_clean(*decode_static_);
}

TEST_F(DisaggServe, RoleErrorsAreClear) {
  const std::string body = json({{"prompt", "Once upon a time"}, {"max_tokens", 4}}).dump();
  const CurlResponse no_header = decode_->post("/v1/completions", body);
  EXPECT_EQ(no_header.status, 400);
  EXPECT_NE(no_header.body.find("X-Densa-Prefill-Url"), std::string::npos) << no_header.body;
  const CurlResponse to_prefill = prefill_->post("/v1/completions", body);
  EXPECT_EQ(to_prefill.status, 400);
  EXPECT_NE(to_prefill.body.find("prefill worker"), std::string::npos) << to_prefill.body;
  EXPECT_EQ(colocated_->post("/v1/completions", body, header()).status, 200) << "role both ignores the header";
}

TEST_F(DisaggServe, IncompatiblePeerIsRefusedWithLayoutMismatch) {
  const std::string body = json({{"prompt", kPrompts[1]}, {"max_tokens", 4}}).dump();
  const CurlResponse r = decode_paged8_->post("/v1/completions", body, header());
  EXPECT_EQ(r.status, 502) << r.body;
  const json e = json::parse(r.body);
  EXPECT_EQ(e["error"]["code"], "kv_layout_mismatch");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("page_size"), std::string::npos) << r.body;
  expect_audit_clean(*decode_paged8_);
}

TEST_F(DisaggServe, UnreachablePrefillFailsTheRequestAndFreesPages) {
  const std::string dead = "-H " + shell_quote("X-Densa-Prefill-Url: http://127.0.0.1:" + std::to_string(free_port()));
  const std::string body = json({{"prompt", kPrompts[2]}, {"max_tokens", 4}}).dump();
  const CurlResponse r = decode_paged8_->post("/v1/completions", body, dead);
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "kv_transfer_failed") << r.body;
  const std::string stream_body = json({{"prompt", kPrompts[2]}, {"max_tokens", 4}, {"stream", true}}).dump();
  const CurlResponse s = decode_paged8_->post("/v1/completions", stream_body, dead);
  EXPECT_EQ(s.status, 200);
  EXPECT_NE(s.body.find("kv_transfer_failed"), std::string::npos) << "an SSE error event: " << s.body;
  const std::string metrics = decode_paged8_->get("/metrics").body;
  EXPECT_GE(metric_value(metrics, "densa_kv_transfer_failures_total"), 2.0);
  EXPECT_GE(metric_value(metrics, "densa_ucx_workers_discarded_total"), 2.0)
      << "a failed transfer's receiving worker is destroyed, not pooled: " << metrics;
  expect_audit_clean(*decode_paged8_);
}

// The prefill worker dies (SIGKILL) after it accepted the prefill order and before its pages
// leave: the decode request fails with kv_transfer_failed, its pages are freed and the decode
// worker keeps serving.
TEST(DisaggServeKill, PrefillWorkerDiesMidTransfer) {
  setenv("UCX_TLS", "tcp", 1);
  setenv("DENSA_DISAGG_SEND_DELAY_MS", "5000", 1);
  ServerProcess prefill({"--role", "prefill"});
  unsetenv("DENSA_DISAGG_SEND_DELAY_MS");
  ServerProcess decode({"--role", "decode", "--disagg-timeout-ms", "20000"});
  ServerProcess healthy_prefill({"--role", "prefill"});
  ASSERT_TRUE(prefill.wait_ready() && decode.wait_ready() && healthy_prefill.wait_ready());
  const std::string body = json({{"prompt", kPrompts[0]}, {"max_tokens", 8}, {"temperature", 0}}).dump();
  const std::string to_prefill = "-H " + shell_quote("X-Densa-Prefill-Url: " + prefill.url(""));
  std::future<CurlResponse> pending = std::async(std::launch::async, [&] { return decode.post("/v1/completions", body, to_prefill); });
  // Wait until the prefill worker holds the order (its request finished: prompt tokens
  // counted), then kill it while it sits on the converted pages.
  for (int i = 0; i < 200; ++i) {
    if (metric_value(prefill.get("/metrics").body, "densa_requests_finished_total") >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  prefill.kill_hard();
  const CurlResponse r = pending.get();
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "kv_transfer_failed") << r.body;
  const CurlResponse h = decode.get("/health?audit=1");
  EXPECT_EQ(json::parse(h.body)["audit"], "ok") << h.body;
  EXPECT_EQ(json::parse(h.body)["kv_pages_used"], 0) << h.body;
  EXPECT_EQ(metric_value(decode.get("/metrics").body, "densa_kv_transfer_failures_total"), 1.0);
  const std::string to_healthy = "-H " + shell_quote("X-Densa-Prefill-Url: " + healthy_prefill.url(""));
  EXPECT_EQ(decode.post("/v1/completions", body, to_healthy).status, 200) << "the decode worker still serves";
  EXPECT_EQ(decode.stop(), 0);
  EXPECT_EQ(healthy_prefill.stop(), 0);
}

// Transfers reuse pooled UCX workers on both sides (the decode worker's receiving worker, the
// prefill worker's connection to it). A prefill worker that served through the decode
// worker's pooled worker then dies (SIGKILL): that worker still serves the next transfer, from
// another prefill worker, with the same output.
TEST(DisaggServeKill, PooledWorkersOutliveAKilledPrefillPeer) {
  setenv("UCX_TLS", "tcp", 1);
  ServerProcess doomed({"--role", "prefill"});
  ServerProcess other({"--role", "prefill"});
  ServerProcess decode({"--role", "decode", "--disagg-timeout-ms", "20000"});
  ASSERT_TRUE(doomed.wait_ready() && other.wait_ready() && decode.wait_ready());
  const std::string body = json({{"prompt", kPrompts[0]}, {"max_tokens", 8}, {"temperature", 0}}).dump();
  auto via = [&](const ServerProcess& prefill) {
    return decode.post("/v1/completions", body, "-H " + shell_quote("X-Densa-Prefill-Url: " + prefill.url("")));
  };
  auto decode_metric = [&](const char* name) { return metric_value(decode.get("/metrics").body, name); };
  // The receiving worker goes back to the pool once the prefill worker's answer is in, which
  // may come a moment after the completion itself.
  auto wait_pooled = [&] {
    for (int i = 0; i < 200 && decode_metric("densa_ucx_workers_idle") < 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return decode_metric("densa_ucx_workers_idle");
  };
  const CurlResponse first = via(doomed);
  ASSERT_EQ(first.status, 200) << first.body << decode.log();
  const std::string text = json::parse(first.body)["choices"][0]["text"];
  ASSERT_EQ(wait_pooled(), 1.0) << decode.get("/metrics").body;
  const CurlResponse second = via(doomed);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(json::parse(second.body)["choices"][0]["text"], text);
  ASSERT_EQ(wait_pooled(), 1.0);
  EXPECT_EQ(decode_metric("densa_ucx_workers_created_total"), 1.0);
  EXPECT_EQ(decode_metric("densa_ucx_workers_reused_total"), 1.0);
  const std::string sender_metrics = doomed.get("/metrics").body;
  EXPECT_EQ(metric_value(sender_metrics, "densa_ucx_workers_created_total"), 1.0) << sender_metrics;
  EXPECT_EQ(metric_value(sender_metrics, "densa_ucx_workers_reused_total"), 1.0) << "the connection is kept";

  doomed.kill_hard();
  for (int i = 0; i < 2; ++i) {
    const CurlResponse r = via(other);
    ASSERT_EQ(r.status, 200) << r.body << decode.log();
    EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], text);
    wait_pooled();
  }
  EXPECT_EQ(decode_metric("densa_ucx_workers_created_total"), 1.0) << "the pooled worker served the other peer";
  EXPECT_EQ(decode_metric("densa_ucx_workers_reused_total"), 3.0);
  EXPECT_EQ(decode_metric("densa_kv_transfer_failures_total"), 0.0);
  const CurlResponse h = decode.get("/health?audit=1");
  EXPECT_EQ(json::parse(h.body)["audit"], "ok") << h.body;
  EXPECT_EQ(decode.stop(), 0) << decode.log();
  EXPECT_EQ(other.stop(), 0);
}

// The other direction: the prefill worker keeps a pooled connection to a decode worker's
// receiving worker, then that decode worker dies (SIGKILL). The prefill worker serves a new
// decode worker as before, and the connection to the dead one neither breaks a transfer nor
// keeps the prefill worker from exiting cleanly.
TEST(DisaggServeKill, APrefillWorkerServesOnAfterItsPooledPeerDied) {
  setenv("UCX_TLS", "tcp", 1);
  ServerProcess prefill({"--role", "prefill"});
  ServerProcess doomed({"--role", "decode", "--disagg-timeout-ms", "20000"});
  ASSERT_TRUE(prefill.wait_ready() && doomed.wait_ready());
  const std::string body = json({{"prompt", kPrompts[1]}, {"max_tokens", 8}, {"temperature", 0}}).dump();
  const std::string to_prefill = "-H " + shell_quote("X-Densa-Prefill-Url: " + prefill.url(""));
  const CurlResponse first = doomed.post("/v1/completions", body, to_prefill);
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string text = json::parse(first.body)["choices"][0]["text"];
  auto prefill_metric = [&](const char* name) { return metric_value(prefill.get("/metrics").body, name); };
  ASSERT_EQ(prefill_metric("densa_ucx_workers_idle"), 1.0) << "the sender is pooled, still connected";
  doomed.kill_hard();

  ServerProcess decode({"--role", "decode", "--disagg-timeout-ms", "20000"});
  ASSERT_TRUE(decode.wait_ready());
  for (int i = 0; i < 2; ++i) {
    const CurlResponse r = decode.post("/v1/completions", body, to_prefill);
    ASSERT_EQ(r.status, 200) << r.body << prefill.log();
    EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], text);
    // The decode worker pools its receiving worker once the prefill worker's answer is in,
    // which may come a moment after the completion; the next transfer must find it there
    // (same receiver address, so the prefill worker's kept connection fits).
    for (int k = 0; k < 200 && metric_value(decode.get("/metrics").body, "densa_ucx_workers_idle") < 1; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(prefill_metric("densa_ucx_workers_created_total"), 2.0) << "one connection per receiver";
  EXPECT_EQ(prefill_metric("densa_ucx_workers_reused_total"), 1.0);
  EXPECT_EQ(prefill_metric("densa_kv_transfer_failures_total"), 0.0);
  EXPECT_EQ(decode.stop(), 0);
  EXPECT_EQ(prefill.stop(), 0) << "closing the pooled connection to the dead peer must not hang:\n" << prefill.log();
}

// The decode worker gives up on a slow prefill worker (its timeout passes before the pages
// leave), destroys that transfer's receiving worker and frees the pages. The prefill worker
// then sends them late, to a receiver that no longer exists: that send fails and its worker is
// not kept. The decode worker's next transfer, on a new receiving worker, gets exactly its own
// pages: the output equals a clean run's.
TEST(DisaggServeKill, LatePagesOfATimedOutTransferNeverReachTheNextOne) {
  setenv("UCX_TLS", "tcp", 1);
  setenv("DENSA_DISAGG_SEND_DELAY_MS", "1500", 1);
  ServerProcess slow({"--role", "prefill"});
  unsetenv("DENSA_DISAGG_SEND_DELAY_MS");
  ServerProcess prompt_prefill({"--role", "prefill"});
  ServerProcess decode({"--role", "decode", "--disagg-timeout-ms", "700"});
  ServerProcess colocated({});
  ASSERT_TRUE(slow.wait_ready() && prompt_prefill.wait_ready() && decode.wait_ready() && colocated.wait_ready());
  const std::string body = json({{"prompt", kPrompts[2]}, {"max_tokens", 8}, {"temperature", 0}}).dump();
  auto via = [&](const ServerProcess& prefill) {
    return decode.post("/v1/completions", body, "-H " + shell_quote("X-Densa-Prefill-Url: " + prefill.url("")));
  };
  const CurlResponse timed_out = via(slow);
  EXPECT_EQ(timed_out.status, 502) << timed_out.body;
  EXPECT_EQ(json::parse(timed_out.body)["error"]["code"], "kv_transfer_failed") << timed_out.body;
  // Wait until the slow worker has tried its late send (1.5 s after the order) and failed.
  double late_failures = 0;
  for (int i = 0; i < 500 && late_failures < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    late_failures = metric_value(slow.get("/metrics").body, "densa_kv_transfer_failures_total");
  }
  EXPECT_EQ(late_failures, 1.0) << "the late send must fail: its receiver is gone\n" << slow.log();
  const std::string slow_metrics = slow.get("/metrics").body;
  EXPECT_EQ(metric_value(slow_metrics, "densa_ucx_workers_idle"), 0.0) << "a failed sender is not kept";
  EXPECT_EQ(metric_value(slow_metrics, "densa_ucx_workers_discarded_total"), 1.0) << slow_metrics;

  const CurlResponse ref = colocated.post("/v1/completions", body);
  for (int i = 0; i < 2; ++i) {
    const CurlResponse r = via(prompt_prefill);
    ASSERT_EQ(r.status, 200) << r.body << decode.log();
    EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], json::parse(ref.body)["choices"][0]["text"]);
  }
  const std::string metrics = decode.get("/metrics").body;
  EXPECT_EQ(metric_value(metrics, "densa_kv_transfer_failures_total"), 1.0) << metrics;
  EXPECT_GE(metric_value(metrics, "densa_ucx_workers_discarded_total"), 1.0) << "the timed-out receiver";
  const CurlResponse h = decode.get("/health?audit=1");
  EXPECT_EQ(json::parse(h.body)["audit"], "ok") << h.body;
  EXPECT_EQ(json::parse(h.body)["kv_pages_used"], 0) << h.body;
  for (ServerProcess* s : {&decode, &slow, &prompt_prefill, &colocated}) EXPECT_EQ(s->stop(), 0) << s->log();
}

}  // namespace
}  // namespace densa::testing
