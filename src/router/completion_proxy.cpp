#include "router/completion_proxy.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/sse.h"
#include "router/client_connection.h"
#include "router/request_cost.h"
#include "router/sse_framer.h"
#include "router/upstream_call.h"

namespace densa::router {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using api::ApiError;

// How often a waiting handler looks at its client and the stop flag.
constexpr std::chrono::milliseconds kTick{50};

// Error codes a decode worker reports when it could not get the KV from the prefill worker.
constexpr std::string_view kKvTransferFailed = "kv_transfer_failed";
constexpr std::string_view kKvLayoutMismatch = "kv_layout_mismatch";

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

api::ApiError router_error(int http_status, std::string message, std::string code, int retry_after_s = 0) {
  return api::ApiError{http_status, "server_error", std::move(message), "", std::move(code), retry_after_s};
}

// A worker's answer kept whole, sent to the client as it is.
struct WholeResponse {
  int status = 200;
  std::string content_type;
  std::string retry_after;
  std::string body;
};

void send_whole(httplib::Response& res, const WholeResponse& w) {
  res.status = w.status;
  if (!w.retry_after.empty()) res.set_header("Retry-After", w.retry_after);
  res.set_content(w.body, w.content_type.empty() ? "application/json" : w.content_type);
}

// error.code of an OpenAI error body; empty when there is none.
std::string error_code_of(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {};
  auto e = j.find("error");
  if (e == j.end() || !e->is_object()) return {};
  auto c = e->find("code");
  return c != e->end() && c->is_string() ? c->get<std::string>() : std::string();
}

// One try on one (prefill, decode) pair. Members are destroyed bottom-up: the call (its
// thread joined) before the leases.
struct Attempt {
  WorkerId prefill, decode;
  LoadLease prefill_lease, decode_lease;
  Clock::time_point sent;
  std::unique_ptr<UpstreamCall> call;
};

std::unique_ptr<Attempt> start_attempt(RouterContext& ctx, const std::string& path, const httplib::Request& req,
                                       WorkerId prefill, WorkerId decode, const RequestCost& cost) {
  auto a = std::make_unique<Attempt>();
  a->prefill = prefill;
  a->decode = decode;
  a->prefill_lease = LoadLease(ctx.pool, prefill, cost.prefill_tokens());
  a->decode_lease = LoadLease(ctx.pool, decode, cost.decode_tokens());
  UpstreamRequest up;
  up.origin = ctx.pool.url(decode).origin;
  up.method = "POST";
  up.path = path;
  up.body = req.body;
  up.connect_timeout_ms = ctx.config.connect_timeout_ms;
  up.read_timeout_ms = ctx.config.timeout_ms;
  const std::string content_type = req.get_header_value("Content-Type");
  up.headers.emplace_back("Content-Type", content_type.empty() ? "application/json" : content_type);
  for (const char* h : {"Accept", "Authorization", "X-Request-Id"})
    if (req.has_header(h)) up.headers.emplace_back(h, req.get_header_value(h));
  up.headers.emplace_back(kPrefillUrlHeader, ctx.pool.url(prefill).origin);
  a->sent = Clock::now();
  a->call = std::make_unique<UpstreamCall>(std::move(up));
  return a;
}

// How the wait for an attempt's first byte ended.
struct FirstOutcome {
  enum class Kind { kStream, kWhole, kRetry, kClientGone, kStopping };
  Kind kind = Kind::kRetry;
  std::optional<WholeResponse> whole;  // kWhole; kRetry: the worker's own answer, if it gave one
  // kStream: the complete events received so far and the framer holding any partial one.
  std::string stream_events;
  SseFramer framer;
  bool saw_done = false;
  // kRetry: why, whom to mark failed, which worker(s) this request should avoid next.
  std::string reason;
  std::optional<WorkerId> blame;
  bool avoid_prefill = false, avoid_decode = false;
};

// A worker's error answer before the first byte: retry it (filling `out`) or pass it on.
bool retryable(int status, const std::string& code, const Attempt& a, const RouterContext& ctx, FirstOutcome& out) {
  const std::string decode_url = ctx.pool.url(a.decode).origin;
  const std::string prefill_url = ctx.pool.url(a.prefill).origin;
  if (code == kKvTransferFailed) {
    out.reason = "decode worker " + decode_url + " could not pull the KV from prefill worker " + prefill_url;
    out.blame = a.prefill;
    out.avoid_prefill = true;
  } else if (code == kKvLayoutMismatch) {
    out.reason = "prefill worker " + prefill_url + " and decode worker " + decode_url + " have different KV layouts";
    out.avoid_prefill = true;
  } else if (status == 503) {
    out.reason = "decode worker " + decode_url + " is unavailable (503)";
    out.blame = a.decode;
    out.avoid_decode = true;
  } else if (status == 502 || status == 429) {
    out.reason = "decode worker " + decode_url + " answered " + std::to_string(status);
    out.avoid_decode = true;
  } else {
    return false;
  }
  out.kind = FirstOutcome::Kind::kRetry;
  return true;
}

// Waits until the client may be given something: a whole answer, or the first complete SSE
// event of a stream (an error event about the KV transfer is retried instead).
FirstOutcome await_first_byte(RouterContext& ctx, Attempt& a, const ClientConnection& client) {
  FirstOutcome out;
  const std::string decode_url = ctx.pool.url(a.decode).origin;
  const auto silence_limit = std::chrono::milliseconds(ctx.config.timeout_ms);
  auto fail = [&](std::string reason) {
    a.call->cancel();
    out.kind = FirstOutcome::Kind::kRetry;
    out.reason = std::move(reason);
    out.blame = a.decode;
    out.avoid_decode = true;
    return std::move(out);
  };
  Clock::time_point last = Clock::now();
  std::optional<UpstreamEvent> head;
  bool stream = false, got_body = false;
  std::string body;
  while (true) {
    if (ctx.stopping.load()) {
      a.call->cancel();
      out.kind = FirstOutcome::Kind::kStopping;
      return out;
    }
    if (client.hung_up()) {
      a.call->cancel();
      out.kind = FirstOutcome::Kind::kClientGone;
      return out;
    }
    UpstreamEvent ev = a.call->next(kTick);
    switch (ev.kind) {
      case UpstreamEvent::Kind::kNothing:
        if (Clock::now() - last > silence_limit)
          return fail("decode worker " + decode_url + " sent nothing for " + std::to_string(ctx.config.timeout_ms) + " ms");
        break;
      case UpstreamEvent::Kind::kHead:
        last = Clock::now();
        stream = ev.status == 200 && ev.content_type.rfind("text/event-stream", 0) == 0;
        head = std::move(ev);
        break;
      case UpstreamEvent::Kind::kBody:
        last = Clock::now();
        if (!got_body) ctx.metrics.observe_first_byte(seconds_since(a.sent));
        got_body = true;
        if (!stream) {
          body += ev.bytes;
          break;
        }
        for (std::string& e : out.framer.feed(ev.bytes)) {
          const std::string data = sse_event_data(e);
          if (out.stream_events.empty()) {
            const std::string code = error_code_of(data);
            if (!code.empty() && retryable(502, code, a, ctx, out)) {
              a.call->cancel();
              out.whole = WholeResponse{200, head->content_type, "", e + api::sse_done()};
              return out;
            }
          }
          if (data == "[DONE]") out.saw_done = true;
          out.stream_events += e;
        }
        if (!out.stream_events.empty()) {
          out.kind = FirstOutcome::Kind::kStream;
          return out;
        }
        break;
      case UpstreamEvent::Kind::kEnd: {
        if (!head) return fail("decode worker " + decode_url + " ended without a response");
        ctx.metrics.observe_upstream(seconds_since(a.sent));
        WholeResponse whole{head->status, head->content_type, head->retry_after, std::move(body)};
        if (stream) whole.body = out.stream_events + out.framer.pending();
        if (whole.status != 200 && retryable(whole.status, error_code_of(whole.body), a, ctx, out)) {
          out.whole = std::move(whole);
          return out;
        }
        out.kind = FirstOutcome::Kind::kWhole;
        out.whole = std::move(whole);
        return out;
      }
      case UpstreamEvent::Kind::kFailed:
        // Nothing has reached the client: another pair may do better.
        return fail("decode worker " + decode_url + " failed" + (head ? " before its first byte" : "") + ": " + ev.error);
    }
  }
}

// An SSE response relayed event by event; shared by httplib's content provider and releaser.
struct StreamRelay {
  RouterContext& ctx;
  std::unique_ptr<Attempt> attempt;
  ClientConnection client;
  SseFramer framer;
  std::string ready;        // complete events not yet written
  bool saw_done = false;
  bool finished = false;
  Clock::time_point last = Clock::now();

  // Ends the stream with an error event (unless the worker already said [DONE]).
  void fail(const std::string& reason) {
    ctx.metrics.count_stream_failure();
    ctx.metrics.count_upstream_failure();
    if (!saw_done)
      ready += api::sse_event(api::error_body(router_error(502, reason, "upstream_failed"))) + api::sse_done();
    finished = true;
    std::fprintf(stderr, "densa router: stream failed: %s\n", reason.c_str());
  }

  // Moves what the worker sent into `ready`; false when the client is gone.
  bool poll_upstream(httplib::DataSink& sink) {
    const std::string decode_url = ctx.pool.url(attempt->decode).origin;
    if (ctx.stopping.load()) {
      attempt->call->cancel();
      fail("the router is shutting down");
      return true;
    }
    if (client.hung_up() || !sink.is_writable()) return false;
    UpstreamEvent ev = attempt->call->next(kTick);
    switch (ev.kind) {
      case UpstreamEvent::Kind::kNothing:
        if (Clock::now() - last > std::chrono::milliseconds(ctx.config.timeout_ms)) {
          attempt->call->cancel();
          fail("decode worker " + decode_url + " sent nothing for " + std::to_string(ctx.config.timeout_ms) + " ms");
        }
        break;
      case UpstreamEvent::Kind::kHead:
        break;
      case UpstreamEvent::Kind::kBody:
        last = Clock::now();
        for (std::string& e : framer.feed(ev.bytes)) {
          if (sse_event_data(e) == "[DONE]") saw_done = true;
          ready += e;
        }
        break;
      case UpstreamEvent::Kind::kEnd:
        ctx.metrics.observe_upstream(seconds_since(attempt->sent));
        ready += framer.pending();
        finished = true;
        break;
      case UpstreamEvent::Kind::kFailed:
        ctx.pool.mark_failed(attempt->decode, "failed mid-stream: " + ev.error,
                             std::chrono::milliseconds(ctx.config.failure_hold_ms));
        fail("decode worker " + decode_url + " failed after the first byte: " + ev.error);
        break;
    }
    return true;
  }

  bool pump(httplib::DataSink& sink) {
    try {
      if (ready.empty() && !finished && !poll_upstream(sink)) return client_gone();
      if (!ready.empty()) {
        if (!sink.write(ready.data(), ready.size())) return client_gone();
        ready.clear();
      }
      if (finished) sink.done();
      return true;
    } catch (...) {
      attempt->call->cancel();
      return false;
    }
  }

  bool client_gone() {
    ctx.metrics.count_client_disconnect();
    attempt->call->cancel();
    return false;
  }
};

void relay_stream(RouterContext& ctx, std::unique_ptr<Attempt> attempt, FirstOutcome first, ClientConnection client,
                  httplib::Response& res) {
  attempt->prefill_lease.release();  // the decode worker holds the KV now
  auto relay = std::make_shared<StreamRelay>(StreamRelay{ctx, std::move(attempt), client, std::move(first.framer),
                                                         std::move(first.stream_events), first.saw_done});
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [relay](size_t, httplib::DataSink& sink) { return relay->pump(sink); },
      [relay](bool) {
        relay->attempt->call->cancel();
        relay->attempt.reset();  // joins the upstream thread, releases the load
      });
}

}  // namespace

void CompletionProxy::handle(api::ApiKind kind, const httplib::Request& req, httplib::Response& res) {
  ctx_.metrics.count_request();
  const RequestCost cost = estimate_request_cost(kind, req.body);
  const ClientConnection client =
      ClientConnection::find(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  std::vector<WorkerId> avoid_prefill, avoid_decode;
  std::optional<WholeResponse> last_answer;
  std::string last_reason;
  for (int i = 0; i <= ctx_.config.max_retries; ++i) {
    const std::optional<WorkerId> prefill = ctx_.pool.pick(WorkerRole::kPrefill, avoid_prefill);
    const std::optional<WorkerId> decode = ctx_.pool.pick(WorkerRole::kDecode, avoid_decode);
    if (!prefill || !decode) {
      if (i > 0) break;
      const char* role = prefill ? "decode" : "prefill";
      return api::send_error(
          res, router_error(503, std::string("no healthy ") + role + " worker", "no_healthy_worker", 1));
    }
    if (i > 0) ctx_.metrics.count_retry();
    std::unique_ptr<Attempt> attempt = start_attempt(ctx_, req.path, req, *prefill, *decode, cost);
    FirstOutcome out = await_first_byte(ctx_, *attempt, client);
    switch (out.kind) {
      case FirstOutcome::Kind::kStopping:
        return api::send_error(res, router_error(503, "the router is shutting down", "", 1));
      case FirstOutcome::Kind::kClientGone:
        ctx_.metrics.count_client_disconnect();
        res.status = 499;  // nobody reads it; counted as a client-side end
        return;
      case FirstOutcome::Kind::kWhole:
        return send_whole(res, *out.whole);
      case FirstOutcome::Kind::kStream:
        return relay_stream(ctx_, std::move(attempt), std::move(out), client, res);
      case FirstOutcome::Kind::kRetry:
        ctx_.metrics.count_upstream_failure();
        std::fprintf(stderr, "densa router: attempt %d failed: %s\n", i + 1, out.reason.c_str());
        if (out.blame)
          ctx_.pool.mark_failed(*out.blame, out.reason, std::chrono::milliseconds(ctx_.config.failure_hold_ms));
        if (out.avoid_prefill) avoid_prefill.push_back(attempt->prefill);
        if (out.avoid_decode) avoid_decode.push_back(attempt->decode);
        last_reason = std::move(out.reason);
        last_answer = std::move(out.whole);
        break;
    }
  }
  if (last_answer) return send_whole(res, *last_answer);
  api::send_error(res, router_error(502, "no worker pair could serve the request; last failure: " + last_reason,
                                       "upstream_failed"));
}

void CompletionProxy::handle_models(const httplib::Request& req, httplib::Response& res) {
  std::vector<WorkerId> avoid;
  for (int i = 0; i <= ctx_.config.max_retries; ++i) {
    const std::optional<WorkerId> decode = ctx_.pool.pick(WorkerRole::kDecode, avoid);
    if (!decode) break;
    avoid.push_back(*decode);
    UpstreamRequest up;
    up.origin = ctx_.pool.url(*decode).origin;
    up.method = "GET";
    up.path = "/v1/models";
    up.connect_timeout_ms = ctx_.config.connect_timeout_ms;
    up.read_timeout_ms = std::min(ctx_.config.timeout_ms, 10000);
    if (req.has_header("Authorization")) up.headers.emplace_back("Authorization", req.get_header_value("Authorization"));
    UpstreamCall call(std::move(up));
    WholeResponse whole;
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(ctx_.config.connect_timeout_ms + 10000);
    bool done = false, failed = false;
    while (!done && !failed && Clock::now() < deadline && !ctx_.stopping.load()) {
      UpstreamEvent ev = call.next(kTick);
      switch (ev.kind) {
        case UpstreamEvent::Kind::kNothing: break;
        case UpstreamEvent::Kind::kHead:
          whole.status = ev.status;
          whole.content_type = ev.content_type;
          break;
        case UpstreamEvent::Kind::kBody: whole.body += ev.bytes; break;
        case UpstreamEvent::Kind::kEnd: done = true; break;
        case UpstreamEvent::Kind::kFailed: failed = true; break;
      }
    }
    if (done) return send_whole(res, whole);
  }
  api::send_error(res, router_error(503, "no healthy decode worker answered /v1/models", "no_healthy_worker", 1));
}

}  // namespace densa::router
