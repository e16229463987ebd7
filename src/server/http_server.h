#pragma once
// HttpServer: the OpenAI-compatible HTTP front of one Engine (cpp-httplib). Routes
//   POST /v1/completions, POST /v1/chat/completions, GET /v1/models,
//   GET /health[?audit=1], GET /metrics,
// checks the Bearer key on /v1/* when one is configured, and turns every failure (and any
// exception) into an OpenAI error body. The engine and weights must outlive the server.
#include <memory>
#include <string>

#include "core/status.h"
#include "engine/engine.h"
#include "grammar/compiled_grammar.h"
#include "model/model_weights.h"
#include "server/chat_prompt.h"
#include "server/disagg_worker.h"

namespace httplib {
class Server;
}

namespace densa::server {

struct ServingContext;
class CompletionHandler;
class Metrics;
class RequestLog;

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (see bound_port())
  std::string api_key;             // empty: no auth
  std::string served_model_name;   // the "model" clients name; required
  int page_size = 16;              // the engine's page size (pool capacity in tokens)
  int num_http_threads = 64;       // connections served at once (each stream holds one)
  std::string request_log_path;    // structured request log (JSON lines); "-" = stderr; empty: off
  ServeRole role = ServeRole::kBoth;        // disaggregation role (server/disagg_worker.h)
  const disagg::UcxContext* ucx = nullptr;  // prefill / decode roles; must outlive the server
  int disagg_timeout_ms = 30000;            // every wait of a KV transfer
  int disagg_ucx_workers = 16;              // idle UCX workers pooled between transfers
  int disagg_ucx_idle_ms = 60000;           // an idle pooled UCX worker older than this is closed
  // Ranks of this server's tensor / expert parallel group (1: one process); the other ranks
  // run a DisaggFollower (server/disagg_follower.h) and each moves its own KV shard.
  int disagg_group_size = 1;
  ChatFormatOptions chat;                   // --chat-template, --tool-parser, --reasoning-parser
  // Resource limits of the HTTP layer (server/README.md "Limits"). Timeouts bound each wait
  // for the client (one read or write making no progress), not a whole request.
  size_t max_body_bytes = 16u << 20;        // request bodies beyond: 413 (chunked ones: 411)
  size_t max_header_bytes = 64u << 10;      // the request line + all headers beyond: 431
  int read_timeout_ms = 10000;              // a client that sends nothing for this long is dropped
  int write_timeout_ms = 10000;             // a client that reads nothing for this long is dropped
  int keep_alive_timeout_s = 2;             // an idle keep-alive connection is closed after this
  grammar::CompileLimits grammar;           // --grammar-max-elements, --grammar-max-positions
  bool allow_fault_injection = false;       // tests / soak: serve the densa_inject_fault extension
};

class HttpServer {
 public:
  HttpServer(Engine& engine, const ModelWeights& weights, HttpServerConfig config);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; fails when the address is taken or the chat template does not
  // parse.
  Status bind();
  // The chat template in force and where it came from, for the start-up log.
  const ChatFormat& chat_format() const;
  int bound_port() const { return port_; }
  // Serves until stop(); returns after in-flight handlers have finished.
  void run();
  // Thread-safe and async-signal-unsafe: call from a normal thread. Open streams end.
  void stop();
  // The server's metrics (e.g. for the quality canary's gauges); thread-safe.
  Metrics& metrics();

 private:
  void register_routes();

  HttpServerConfig config_;
  Status chat_status_;  // make_chat_format's verdict, reported by bind()
  std::unique_ptr<ServingContext> ctx_;
  std::unique_ptr<CompletionHandler> completions_;
  std::unique_ptr<DisaggWorker> disagg_;
  std::unique_ptr<RequestLog> request_log_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
};

}  // namespace densa::server
