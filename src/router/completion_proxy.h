#pragma once
// CompletionProxy: POST /v1/completions and /v1/chat/completions through the router. Picks
// a prefill and a decode worker by the load the router tracks, forwards the body unchanged
// to the decode worker with X-Densa-Prefill-Url naming the prefill worker, and relays the
// answer: a JSON body as a whole, an SSE stream event by event as the worker writes it.
//
// Until the client has seen a byte, a failed attempt (no connection, no answer in time, a
// worker that dies, a decode worker that reports kv_transfer_failed / kv_layout_mismatch, or
// answers 429 / 502 / 503) is retried on another pair, at most max_retries times; the worker
// to blame is marked failed. After the first byte a dead worker ends the stream with an
// error event (code upstream_failed) and [DONE]. A client that hangs up cancels the upstream.
// Also GET /v1/models, answered by a decode worker.
#include "api/openai_request.h"
#include "router/router_context.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace densa::router {

inline constexpr const char* kPrefillUrlHeader = "X-Densa-Prefill-Url";

class CompletionProxy {
 public:
  explicit CompletionProxy(RouterContext& ctx) : ctx_(ctx) {}
  void handle(api::ApiKind kind, const httplib::Request& req, httplib::Response& res);
  void handle_models(const httplib::Request& req, httplib::Response& res);

 private:
  RouterContext& ctx_;
};

}  // namespace densa::router
