#include "server/http_server.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/http_bind.h"
#include "server/completion_handler.h"
#include "server/kv_integrity_admin.h"
#include "server/openai_response.h"
#include "server/serving_context.h"
#include "server/serving_error.h"
#include "server/tokenize_handler.h"

namespace densa::server {
namespace {

using nlohmann::json;

bool authorized(const httplib::Request& req, const std::string& api_key) {
  if (api_key.empty()) return true;
  return req.get_header_value("Authorization") == "Bearer " + api_key;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

// Runs a handler so that no exception reaches httplib: anything thrown is a 500.
template <typename F>
httplib::Server::Handler guarded(ServingContext& ctx, F f) {
  return [&ctx, f](const httplib::Request& req, httplib::Response& res) {
    try {
      f(req, res);
    } catch (const std::exception& e) {
      api::send_error(res, api_error(internal_error(std::string("internal error: ") + e.what())));
    } catch (...) {
      api::send_error(res, api_error(internal_error("internal error")));
    }
    if (req.path.rfind("/v1/", 0) == 0) ctx.metrics.count_response(res.status);
  };
}

}  // namespace

HttpServer::HttpServer(Engine& engine, const ModelWeights& weights, HttpServerConfig config)
    : config_(std::move(config)), http_(std::make_unique<httplib::Server>()) {
  CHECK(weights.tokenizer != nullptr) << "HttpServer needs a model with a tokenizer";
  ctx_.reset(new ServingContext{engine, weights, *weights.tokenizer, config_.served_model_name, config_.page_size,
                                ChatFormat{}, {}, {}});
  ctx_->constraints = std::make_unique<OutputConstraints>(*weights.tokenizer, 64, config_.grammar);
  Result<ChatFormat> chat = make_chat_format(weights, config_.chat);
  if (chat.is_ok()) {
    ctx_->chat = std::move(chat).value();
  } else {
    chat_status_ = chat.status();
  }
  completions_ = std::make_unique<CompletionHandler>(*ctx_);
  disagg_ = std::make_unique<DisaggWorker>(*ctx_, config_.role, config_.ucx, config_.disagg_timeout_ms,
                                           config_.disagg_ucx_workers, config_.disagg_ucx_idle_ms,
                                           config_.disagg_group_size);
  if (config_.role == ServeRole::kDecode) ctx_->disagg = disagg_.get();
  ctx_->prefill_only = config_.role == ServeRole::kPrefill;
  ctx_->allow_fault_injection = config_.allow_fault_injection;
  const size_t threads = static_cast<size_t>(std::max(8, config_.num_http_threads));
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(config_.max_body_bytes);
  http_->set_keep_alive_timeout(config_.keep_alive_timeout_s);
  http_->set_read_timeout(config_.read_timeout_ms / 1000, (config_.read_timeout_ms % 1000) * 1000);
  http_->set_write_timeout(config_.write_timeout_ms / 1000, (config_.write_timeout_ms % 1000) * 1000);
  // Small SSE chunks and short JSON answers: without TCP_NODELAY, Nagle's algorithm holds
  // them back waiting for the client's delayed ACK (~40 ms per response on loopback).
  http_->set_tcp_nodelay(true);
  register_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::register_routes() {
  ServingContext& ctx = *ctx_;
  const std::string api_key = config_.api_key;

  // Header bytes first (every route), then Bearer auth on /v1/* before routing, so unknown /v1
  // routes also need the key. httplib has read the headers by now (each line is bounded by
  // its own 8 KiB limit, and the read timeout bounds how long they may take); the total is
  // refused here, before any handler parses anything.
  const size_t max_header_bytes = config_.max_header_bytes;
  const size_t max_body_bytes = config_.max_body_bytes;
  http_->set_pre_routing_handler([api_key, &ctx, max_header_bytes, max_body_bytes](const httplib::Request& req,
                                                                   httplib::Response& res) {
    size_t header_bytes = req.method.size() + req.target.size() + req.version.size() + 4;
    for (const auto& [name, value] : req.headers) header_bytes += name.size() + value.size() + 4;
    if (header_bytes > max_header_bytes) {
      api::send_error(res, api::headers_too_large_error(header_bytes, max_header_bytes));
      res.set_header("Connection", "close");
      if (req.path.rfind("/v1/", 0) == 0) ctx.metrics.count_response(res.status);
      return httplib::Server::HandlerResponse::Handled;
    }
    // httplib 0.11 holds a chunked body to no size limit (it reads it whole before the
    // handler), so only bodies with a Content-Length, checked against --max-body-bytes
    // before they are read, are taken.
    if (req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
      api::send_error(res, api::ApiError{411, "invalid_request_error",
                               "Chunked request bodies are not accepted: send Content-Length (at most " +
                                   std::to_string(max_body_bytes) + " bytes, --max-body-bytes)",
                               "", "length_required", 0});
      res.set_header("Connection", "close");
      if (req.path.rfind("/v1/", 0) == 0) ctx.metrics.count_response(res.status);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path.rfind("/v1/", 0) != 0 || authorized(req, api_key)) return httplib::Server::HandlerResponse::Unhandled;
    api::send_error(res, api::unauthorized_error());
    ctx.metrics.count_response(res.status);
    return httplib::Server::HandlerResponse::Handled;
  });

  http_->Post("/v1/completions", guarded(ctx, [this](const httplib::Request& req, httplib::Response& res) {
                completions_->handle(api::ApiKind::kCompletion, req, res);
              }));
  http_->Post("/v1/chat/completions", guarded(ctx, [this](const httplib::Request& req, httplib::Response& res) {
                completions_->handle(api::ApiKind::kChat, req, res);
              }));
  http_->Get("/v1/models", guarded(ctx, [&ctx](const httplib::Request&, httplib::Response& res) {
               json model = {{"id", ctx.served_model_name},
                             {"object", "model"},
                             {"created", 0},
                             {"owned_by", "densa"},
                             {"max_model_len", ctx.context_tokens()},
                             {"densa_chat_template", ctx.chat.origin},
                             {"densa_tool_parser", ctx.chat.tool_parser},
                             {"densa_reasoning_parser", ctx.chat.reasoning_parser}};
               send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
             }));
  http_->Get("/health", guarded(ctx, [&ctx](const httplib::Request& req, httplib::Response& res) {
               const EngineStats s = ctx.engine.stats();
               json body = {{"status", "ok"},
                            {"model", ctx.served_model_name},
                            {"requests_running", s.num_running},
                            {"requests_waiting", s.num_waiting},
                            {"kv_pages_total", s.kv_pages_total},
                            {"kv_pages_used", s.kv_pages_used},
                            {"kv_pages_cached", s.kv_pages_cached}};
               int status = 200;
               if (req.has_param("audit") && req.get_param_value("audit") != "0") {
                 const Status audit = ctx.engine.audit();
                 body["audit"] = audit.is_ok() ? "ok" : audit.to_string();
                 if (!audit.is_ok()) {
                   body["status"] = "error";
                   status = 500;
                 }
               }
               send_json(res, status, body);
             }));
  http_->Get("/metrics", guarded(ctx, [&ctx](const httplib::Request&, httplib::Response& res) {
               res.set_content(ctx.metrics.render(ctx.engine.stats()) + ctx.disagg_metrics.render(ctx.engine.stats()) + render_routing(ctx.engine.routing_stats()),
                               "text/plain; version=0.0.4");
             }));

  register_tokenize_routes(*http_, ctx);
  register_kv_integrity_admin(*http_, ctx, api_key);
  disagg_->register_routes(*http_);

  // Unknown routes (and 404s no handler wrote a body for) get an OpenAI error body, and so do
  // the refusals httplib makes itself before any handler runs (a body past --max-body-bytes,
  // a request line past its 8 KiB).
  http_->set_error_handler([max_body_bytes](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      const api::ApiError e = api::route_not_found_error(req.method, req.path);
      res.set_content(api::error_body(e), "application/json");
    } else if (res.status == 413) {
      res.set_content(api::error_body(api::body_too_large_error(max_body_bytes)), "application/json");
    } else if (res.status == 414) {
      res.set_content(api::error_body(api::uri_too_long_error()), "application/json");
    } else if (res.status == 400) {
      // A request httplib could not read: malformed, a header line past 8 KiB, or a client
      // that stopped sending mid-request for --http-read-timeout.
      res.set_content(api::error_body(api::ApiError{400, "invalid_request_error",
                                          "Malformed or incomplete HTTP request (a header line past 8 KiB, or the "
                                          "client stopped sending for --http-read-timeout)",
                                          "", "bad_http_request", 0}),
                      "application/json");
    }
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    api::send_error(res, api_error(internal_error("internal error")));
  });
}

const ChatFormat& HttpServer::chat_format() const { return ctx_->chat; }

Status HttpServer::bind() {
  if (!chat_status_.is_ok()) return chat_status_;
  if (!config_.request_log_path.empty() && request_log_ == nullptr) {
    Result<std::unique_ptr<RequestLog>> log = RequestLog::open(config_.request_log_path);
    if (!log.is_ok()) return log.status();
    request_log_ = std::move(log).value();
    ctx_->request_log = request_log_.get();
  }
  api::bind_port_exclusively(*http_);
  const int port = config_.port == 0 ? http_->bind_to_any_port(config_.host)
                                     : (http_->bind_to_port(config_.host, config_.port) ? config_.port : -1);
  if (port <= 0) return unavailable("cannot listen on " + config_.host + ":" + std::to_string(config_.port));
  port_ = port;
  return Status::ok();
}

void HttpServer::run() { http_->listen_after_bind(); }

Metrics& HttpServer::metrics() { return ctx_->metrics; }

void HttpServer::stop() {
  ctx_->stopping.store(true);
  http_->stop();
}

}  // namespace densa::server
