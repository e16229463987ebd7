// CompletionProxy behaviour over real sockets, with in-process fake workers where a test
// needs a worker to misbehave on cue (report a KV transfer failure, die mid-stream, hold a
// request). The same router against real `densa serve` processes: router_serve_test.cpp.
#include "router/completion_proxy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include <nlohmann/json.hpp>

#include "router/router_harness.h"

namespace densa::router {
namespace {

using json = nlohmann::json;
using testing::eventually;
using testing::FakeWorker;
using testing::RouterUnderTest;
using testing::StreamingRequest;

const std::string kBody = R"({"prompt": "hello", "max_tokens": 4})";
const std::string kStreamBody = R"({"prompt": "hello", "max_tokens": 4, "stream": true})";

std::string sse(const std::string& data) { return "data: " + data + "\n\n"; }

// What a fake decode worker saw.
struct Seen {
  std::mutex mu;
  std::vector<std::string> prefill_urls;  // X-Densa-Prefill-Url per request
  std::vector<std::string> bodies;
  void record(const httplib::Request& req) {
    std::lock_guard<std::mutex> lock(mu);
    prefill_urls.push_back(req.get_header_value(kPrefillUrlHeader));
    bodies.push_back(req.body);
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return prefill_urls.size();
  }
};

// A decode worker that answers every completion with its name and the prefill it was told.
std::unique_ptr<FakeWorker> echo_decode(const std::string& name, Seen& seen) {
  return std::make_unique<FakeWorker>([name, &seen](httplib::Server& s) {
    s.Post("/v1/completions", [name, &seen](const httplib::Request& req, httplib::Response& res) {
      seen.record(req);
      res.set_content(json{{"worker", name}, {"prefill", req.get_header_value(kPrefillUrlHeader)}}.dump(),
                      "application/json");
    });
  });
}

int metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + name.size() + 2);
}

TEST(RouterProxy, ForwardsBodyAndPrefillHeaderRoundRobinOnTies) {
  FakeWorker p1, p2;
  Seen seen;
  auto d = echo_decode("d", seen);
  RouterUnderTest router({p1.url(), p2.url()}, {d->url()});
  httplib::Client c = router.client();
  std::vector<std::string> prefills;
  for (int i = 0; i < 4; ++i) {
    httplib::Result r = c.Post("/v1/completions", kBody, "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    prefills.push_back(json::parse(r->body)["prefill"].get<std::string>());
  }
  EXPECT_EQ(prefills, (std::vector<std::string>{p1.url(), p2.url(), p1.url(), p2.url()}));
  std::lock_guard<std::mutex> lock(seen.mu);
  for (const std::string& b : seen.bodies) EXPECT_EQ(b, kBody);
}

TEST(RouterProxy, ClientsPrefillHeaderIsReplacedByTheRoutersChoice) {
  FakeWorker p;
  Seen seen;
  auto d = echo_decode("d", seen);
  RouterUnderTest router({p.url()}, {d->url()});
  httplib::Client c = router.client();
  httplib::Result r = c.Post("/v1/completions", {{kPrefillUrlHeader, "http://evil:1"}}, kBody, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["prefill"], p.url());
}

TEST(RouterProxy, PicksTheDecodeWorkerWithFewestTokensInFlight) {
  FakeWorker p;
  std::atomic<bool> release{false};
  std::atomic<int> held{0};
  Seen seen_b;
  // Decode A holds every request until released; it is first in order, so it gets the first one.
  FakeWorker a([&](httplib::Server& s) {
    s.Post("/v1/completions", [&](const httplib::Request&, httplib::Response& res) {
      ++held;
      eventually([&] { return release.load(); }, std::chrono::seconds(30));
      res.set_content(R"({"worker": "a"})", "application/json");
    });
  });
  auto b = echo_decode("b", seen_b);
  RouterUnderTest router({p.url()}, {a.url(), b->url()});
  std::thread long_request([&] {
    httplib::Client c = router.client();
    httplib::Result r = c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 500})", "application/json");
    EXPECT_TRUE(r && r->status == 200);
  });
  ASSERT_TRUE(eventually([&] { return held.load() == 1; }));
  // While A carries ~500 tokens, every new request goes to B, however the ties would rotate.
  httplib::Client c = router.client();
  for (int i = 0; i < 3; ++i) {
    httplib::Result r = c.Post("/v1/completions", kBody, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(json::parse(r->body)["worker"], "b");
  }
  const json health = json::parse(c.Get("/health")->body);
  EXPECT_EQ(health["decode"][0]["requests_in_flight"], 1);
  EXPECT_GE(health["decode"][0]["tokens_in_flight"].get<int>(), 500);
  EXPECT_EQ(health["decode"][1]["tokens_in_flight"], 0);
  release.store(true);
  long_request.join();
  EXPECT_EQ(held.load(), 1);
  EXPECT_EQ(seen_b.count(), 3u);
  EXPECT_TRUE(eventually([&] { return json::parse(c.Get("/health")->body)["decode"][0]["tokens_in_flight"] == 0; }));
}

TEST(RouterProxy, RelaysEachStreamEventAsTheWorkerWritesIt) {
  FakeWorker p;
  std::atomic<bool> release{false};
  FakeWorker d([&](httplib::Server& s) {
    s.Post("/v1/completions", [&](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [&, step = 0](size_t, httplib::DataSink& sink) mutable {
        if (step == 0) {
          const std::string e = sse(R"({"choices":[{"text":"one"}]})");
          sink.write(e.data(), e.size());
        } else {
          eventually([&] { return release.load(); }, std::chrono::seconds(30));
          const std::string e = sse(R"({"choices":[{"text":"two"}]})") + sse("[DONE]");
          sink.write(e.data(), e.size());
          sink.done();
        }
        ++step;
        return true;
      });
    });
  });
  RouterUnderTest router({p.url()}, {d.url()});
  StreamingRequest stream(router.port(), "/v1/completions", kStreamBody);
  // The first event reaches the client while the worker still holds the rest.
  ASSERT_TRUE(eventually([&] { return stream.num_events() >= 1; }));
  EXPECT_FALSE(stream.done());
  EXPECT_EQ(stream.events()[0], R"({"choices":[{"text":"one"}]})");
  release.store(true);
  stream.join();
  EXPECT_EQ(stream.status(), 200);
  EXPECT_EQ(stream.events(),
            (std::vector<std::string>{R"({"choices":[{"text":"one"}]})", R"({"choices":[{"text":"two"}]})", "[DONE]"}));
}

// A decode worker that cannot pull the KV from `bad_prefill`, answering as the contract says.
std::unique_ptr<FakeWorker> decode_failing_with(const std::string& bad_prefill, const std::string& code, Seen& seen) {
  return std::make_unique<FakeWorker>([bad_prefill, code, &seen](httplib::Server& s) {
    s.Post("/v1/completions", [bad_prefill, code, &seen](const httplib::Request& req, httplib::Response& res) {
      seen.record(req);
      const bool stream = json::parse(req.body).value("stream", false);
      const json err = {{"error", {{"message", "no KV"}, {"type", "server_error"}, {"param", nullptr}, {"code", code}}}};
      if (req.get_header_value(kPrefillUrlHeader) == bad_prefill) {
        if (stream) {
          res.set_content(sse(err.dump()) + sse("[DONE]"), "text/event-stream");
        } else {
          res.status = 502;
          res.set_content(err.dump(), "application/json");
        }
        return;
      }
      if (stream) res.set_content(sse(R"({"choices":[{"text":"ok"}]})") + sse("[DONE]"), "text/event-stream");
      else res.set_content(R"({"choices":[{"text":"ok"}]})", "application/json");
    });
  });
}

TEST(RouterProxy, KvTransferFailureIsRetriedWithAnotherPrefillWorker) {
  FakeWorker p1, p2;
  Seen seen;
  auto d = decode_failing_with(p1.url(), "kv_transfer_failed", seen);
  RouterConfig cfg;
  cfg.failure_hold_ms = 3600 * 1000;  // p1 stays out for the whole test
  RouterUnderTest router({p1.url(), p2.url()}, {d->url()}, cfg);
  httplib::Client c = router.client();
  httplib::Result r = c.Post("/v1/completions", kBody, "application/json");  // picks p1 first
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  StreamingRequest s(router.port(), "/v1/completions", kStreamBody);
  s.join();
  EXPECT_EQ(s.events(), (std::vector<std::string>{R"({"choices":[{"text":"ok"}]})", "[DONE]"}));
  {
    std::lock_guard<std::mutex> lock(seen.mu);
    EXPECT_EQ(seen.prefill_urls, (std::vector<std::string>{p1.url(), p2.url(), p2.url()}));
  }
  const json health = json::parse(c.Get("/health")->body);
  EXPECT_EQ(health["prefill"][0]["healthy"], false);
  EXPECT_NE(health["prefill"][0]["error"].get<std::string>().find("could not pull the KV"), std::string::npos);
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_EQ(metric(metrics, "densa_router_retries_total"), 1);
  EXPECT_EQ(metric(metrics, "densa_router_upstream_failures_total"), 1);
}

TEST(RouterProxy, LayoutMismatchWithEveryPrefillReachesTheClient) {
  FakeWorker p;
  Seen seen;
  auto d = decode_failing_with(p.url(), "kv_layout_mismatch", seen);
  RouterUnderTest router({p.url()}, {d->url()});
  httplib::Client c = router.client();
  httplib::Result r = c.Post("/v1/completions", kBody, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 502);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "kv_layout_mismatch");
  StreamingRequest s(router.port(), "/v1/completions", kStreamBody);
  s.join();
  ASSERT_EQ(s.events().size(), 2u);
  EXPECT_EQ(json::parse(s.events()[0])["error"]["code"], "kv_layout_mismatch");
  // Not the prefill worker's fault: it stays in rotation.
  EXPECT_EQ(json::parse(c.Get("/health")->body)["prefill"][0]["healthy"], true);
}

TEST(RouterProxy, DecodeWorkerDyingMidStreamEndsTheStreamWithAnErrorEvent) {
  FakeWorker p;
  FakeWorker d([](httplib::Server& s) {
    s.Post("/v1/completions", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [step = 0](size_t, httplib::DataSink& sink) mutable {
        if (step++ == 2) return false;  // the worker drops the connection without finishing
        const std::string e = sse(R"({"choices":[{"text":"t"}]})");
        sink.write(e.data(), e.size());
        return true;
      });
    });
  });
  RouterConfig cfg;
  cfg.failure_hold_ms = 3600 * 1000;
  RouterUnderTest router({p.url()}, {d.url()}, cfg);
  StreamingRequest s(router.port(), "/v1/completions", kStreamBody);
  s.join();
  EXPECT_EQ(s.status(), 200);
  const std::vector<std::string> events = s.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0], R"({"choices":[{"text":"t"}]})");
  EXPECT_EQ(events[1], R"({"choices":[{"text":"t"}]})");
  const json err = json::parse(events[2]);
  EXPECT_EQ(err["error"]["code"], "upstream_failed");
  EXPECT_EQ(err["error"]["type"], "server_error");
  EXPECT_EQ(events[3], "[DONE]");
  httplib::Client c = router.client();
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_EQ(metric(metrics, "densa_router_stream_failures_total"), 1);
  EXPECT_EQ(json::parse(c.Get("/health")->body)["decode"][0]["healthy"], false);
  EXPECT_EQ(c.Get("/health")->status, 503);
}

TEST(RouterProxy, DecodeWorkerDyingBeforeTheFirstByteIsRetriedElsewhere) {
  FakeWorker p;
  std::atomic<int> cut{0};
  FakeWorker bad([&](httplib::Server& s) {
    s.Post("/v1/completions", [&](const httplib::Request&, httplib::Response& res) {
      ++cut;  // headers go out, then the connection drops before any event
      res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink&) { return false; });
    });
  });
  Seen seen;
  auto good = echo_decode("good", seen);
  RouterConfig cfg;
  cfg.failure_hold_ms = 3600 * 1000;
  RouterUnderTest router({p.url()}, {bad.url(), good->url()}, cfg);
  httplib::Client c = router.client();
  for (int i = 0; i < 3; ++i) {
    httplib::Result r = c.Post("/v1/completions", kBody, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(json::parse(r->body)["worker"], "good");
  }
  EXPECT_EQ(cut.load(), 1);  // marked failed after the first cut: not picked again
  EXPECT_EQ(metric(c.Get("/metrics")->body, "densa_router_retries_total"), 1);
}

TEST(RouterProxy, ClientHangingUpMidStreamCancelsTheUpstream) {
  FakeWorker p;
  std::atomic<bool> upstream_closed{false};
  FakeWorker d([&](httplib::Server& s) {
    s.Post("/v1/completions", [&](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider(
          "text/event-stream",
          [&](size_t, httplib::DataSink& sink) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            const std::string e = sse(R"({"choices":[{"text":"t"}]})");
            return sink.write(e.data(), e.size()) && sink.is_writable();  // endless until the router leaves
          },
          [&](bool) { upstream_closed.store(true); });
    });
  });
  RouterUnderTest router({p.url()}, {d.url()});
  StreamingRequest s(router.port(), "/v1/completions", kStreamBody);
  ASSERT_TRUE(eventually([&] { return s.num_events() >= 2; }));
  s.hang_up();
  s.join();
  EXPECT_TRUE(eventually([&] { return upstream_closed.load(); }));
  httplib::Client c = router.client();
  EXPECT_TRUE(eventually([&] { return metric(c.Get("/metrics")->body, "densa_router_client_disconnects_total") == 1; }));
  EXPECT_TRUE(eventually([&] { return json::parse(c.Get("/health")->body)["decode"][0]["requests_in_flight"] == 0; }));
}

TEST(RouterProxy, ClientHangingUpBeforeTheAnswerCancelsTheUpstream) {
  FakeWorker p;
  std::atomic<bool> upstream_closed{false};
  // A non-streamed answer that trickles (JSON whitespace) and never ends by itself.
  FakeWorker d([&](httplib::Server& s) {
    s.Post("/v1/completions", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content_provider(
          1 << 20, "application/json",
          [&](size_t, size_t, httplib::DataSink& sink) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            return sink.write(" ", 1);
          },
          [&](bool) { upstream_closed.store(true); });
    });
  });
  RouterUnderTest router({p.url()}, {d.url()});
  httplib::Client c("127.0.0.1", router.port());
  c.set_read_timeout(std::chrono::milliseconds(300));  // the client gives up and closes
  httplib::Result r = c.Post("/v1/completions", kBody, "application/json");
  EXPECT_FALSE(r);
  EXPECT_TRUE(eventually([&] { return upstream_closed.load(); }));
  httplib::Client c2 = router.client();
  EXPECT_TRUE(eventually([&] { return metric(c2.Get("/metrics")->body, "densa_router_client_disconnects_total") == 1; }));
}

TEST(RouterProxy, WorkerErrorsPassThroughAndOddBodiesNeverHurtTheRouter) {
  FakeWorker p;
  FakeWorker d([](httplib::Server& s) {
    s.Post("/v1/completions", [](const httplib::Request& req, httplib::Response& res) {
      if (req.body.empty() || req.body[0] != '{' || json::parse(req.body, nullptr, false).is_discarded()) {
        res.status = 400;
        res.set_content(R"({"error": {"message": "bad JSON", "type": "invalid_request_error", "code": null}})",
                        "application/json");
        return;
      }
      res.set_content("{}", "application/json");
    });
  });
  RouterConfig cfg;
  cfg.max_body_bytes = 1 << 20;
  RouterUnderTest router({p.url()}, {d.url()}, cfg);
  httplib::Client c = router.client();
  for (const std::string& body : {std::string(), std::string("{"), std::string("\xff\xfe garbage"),
                                  std::string((1 << 20) - 1, '[')}) {
    httplib::Result r = c.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(json::parse(r->body)["error"]["message"], "bad JSON");
  }
  httplib::Result big = c.Post("/v1/completions", std::string((1 << 20) + 1, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(json::parse(big->body)["error"]["message"], "request body too large");
  httplib::Result unknown = c.Get("/v1/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body)["error"]["code"], "unknown_url");
  httplib::Result ok = c.Post("/v1/completions", kBody, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(metric(c.Get("/metrics")->body, "densa_router_requests_total"), 5);
}

TEST(RouterProxy, ApiKeyIsCheckedAndForwarded) {
  FakeWorker p;
  FakeWorker d([](httplib::Server& s) {
    s.Post("/v1/completions", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(json{{"auth", req.get_header_value("Authorization")}}.dump(), "application/json");
    });
  });
  RouterConfig cfg;
  cfg.api_key = "sekret";
  RouterUnderTest router({p.url()}, {d.url()}, cfg);
  httplib::Client c = router.client();
  httplib::Result no_key = c.Post("/v1/completions", kBody, "application/json");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  EXPECT_EQ(json::parse(no_key->body)["error"]["code"], "invalid_api_key");
  c.set_bearer_token_auth("sekret");
  httplib::Result with_key = c.Post("/v1/completions", kBody, "application/json");
  ASSERT_TRUE(with_key);
  EXPECT_EQ(with_key->status, 200);
  EXPECT_EQ(json::parse(with_key->body)["auth"], "Bearer sekret");
  EXPECT_EQ(c.Get("/health")->status, 200);  // /health needs no key
}

TEST(RouterProxy, HealthIs503WithoutAHealthyWorkerOfEachRoleAndRecovers) {
  FakeWorker p;
  FakeWorker d([](httplib::Server& s) {
    s.Post("/v1/completions",
           [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
  });
  d.set_healthy(false);
  RouterConfig cfg;
  cfg.health_interval_ms = 20;
  RouterUnderTest router({p.url()}, {d.url()}, cfg);
  httplib::Client c = router.client();
  httplib::Result h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  const json body = json::parse(h->body);
  EXPECT_EQ(body["status"], "unavailable");
  EXPECT_EQ(body["prefill"][0]["healthy"], true);
  EXPECT_EQ(body["decode"][0]["healthy"], false);
  EXPECT_EQ(body["decode"][0]["url"], d.url());
  EXPECT_NE(body["decode"][0]["error"].get<std::string>().find("503"), std::string::npos);
  httplib::Result r = c.Post("/v1/completions", kBody, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "no_healthy_worker");
  d.set_healthy(true);
  EXPECT_TRUE(eventually([&] { return c.Get("/health")->status == 200; }));
  EXPECT_EQ(c.Post("/v1/completions", kBody, "application/json")->status, 200);
}

TEST(RouterProxy, MetricsCountRequestsAndShowPerWorkerGauges) {
  FakeWorker p;
  Seen seen;
  auto d = echo_decode("d", seen);
  RouterUnderTest router({p.url()}, {d->url()});
  httplib::Client c = router.client();
  for (int i = 0; i < 2; ++i) ASSERT_EQ(c.Post("/v1/completions", kBody, "application/json")->status, 200);
  const std::string m = c.Get("/metrics")->body;
  EXPECT_EQ(metric(m, "densa_router_requests_total"), 2);
  EXPECT_NE(m.find("densa_router_responses_total{code=\"2xx\"} 2\n"), std::string::npos);
  EXPECT_NE(m.find("densa_router_worker_tokens_in_flight{role=\"decode\",url=\"" + d->url() + "\"} 0\n"),
            std::string::npos);
  EXPECT_NE(m.find("densa_router_worker_healthy{role=\"prefill\",url=\"" + p.url() + "\"} 1\n"), std::string::npos);
  EXPECT_EQ(metric(m, "densa_router_upstream_seconds_count"), 2);
  EXPECT_EQ(metric(m, "densa_router_upstream_first_byte_seconds_count"), 2);
}

}  // namespace
}  // namespace densa::router
