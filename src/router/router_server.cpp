#include "router/router_server.h"

#include <httplib.h>

#include <algorithm>
#include <exception>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/http_bind.h"
#include "router/completion_proxy.h"
#include "router/health_prober.h"

namespace densa::router {
namespace {

using nlohmann::json;

bool authorized(const httplib::Request& req, const std::string& api_key) {
  return api_key.empty() || req.get_header_value("Authorization") == "Bearer " + api_key;
}

// Runs a handler so that no exception reaches httplib: anything thrown is a 500.
template <typename F>
httplib::Server::Handler guarded(RouterContext& ctx, F f) {
  return [&ctx, f](const httplib::Request& req, httplib::Response& res) {
    try {
      f(req, res);
    } catch (const std::exception& e) {
      api::send_error(res, api::error_for_status(internal_error(std::string("internal error: ") + e.what())));
    } catch (...) {
      api::send_error(res, api::error_for_status(internal_error("internal error")));
    }
    if (req.path.rfind("/v1/", 0) == 0) ctx.metrics.count_response(res.status);
  };
}

json health_json(const RouterContext& ctx, bool ok) {
  json prefill = json::array(), decode = json::array();
  for (const WorkerSnapshot& w : ctx.pool.snapshot()) {
    json j = {{"url", w.url},
              {"healthy", w.healthy},
              {"tokens_in_flight", w.tokens_in_flight},
              {"requests_in_flight", w.requests_in_flight},
              {"failures", w.failures}};
    if (!w.last_error.empty()) j["error"] = w.last_error;
    (w.role == WorkerRole::kPrefill ? prefill : decode).push_back(std::move(j));
  }
  return {{"status", ok ? "ok" : "unavailable"}, {"prefill", prefill}, {"decode", decode}};
}

}  // namespace

RouterServer::RouterServer(RouterConfig config)
    : ctx_(std::make_unique<RouterContext>(std::move(config))),
      proxy_(std::make_unique<CompletionProxy>(*ctx_)),
      http_(std::make_unique<httplib::Server>()) {
  HealthProberConfig pc;
  pc.interval = std::chrono::milliseconds(std::max(10, ctx_->config.health_interval_ms));
  pc.connect_timeout = std::chrono::milliseconds(std::min(ctx_->config.connect_timeout_ms, 1000));
  prober_ = std::make_unique<HealthProber>(ctx_->pool, pc);
  const size_t threads = static_cast<size_t>(std::max(8, ctx_->config.num_http_threads));
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(ctx_->config.max_body_bytes);
  http_->set_keep_alive_timeout(2);
  http_->set_tcp_nodelay(true);  // see server/http_server.cpp
  register_routes();
}

RouterServer::~RouterServer() { prober_->stop(); }

void RouterServer::register_routes() {
  RouterContext& ctx = *ctx_;
  const std::string api_key = ctx.config.api_key;

  http_->set_pre_routing_handler([api_key, &ctx](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) != 0 || authorized(req, api_key)) return httplib::Server::HandlerResponse::Unhandled;
    api::send_error(res, api::unauthorized_error());
    ctx.metrics.count_response(res.status);
    return httplib::Server::HandlerResponse::Handled;
  });
  http_->Post("/v1/completions", guarded(ctx, [this](const httplib::Request& req, httplib::Response& res) {
                proxy_->handle(api::ApiKind::kCompletion, req, res);
              }));
  http_->Post("/v1/chat/completions", guarded(ctx, [this](const httplib::Request& req, httplib::Response& res) {
                proxy_->handle(api::ApiKind::kChat, req, res);
              }));
  http_->Get("/v1/models", guarded(ctx, [this](const httplib::Request& req, httplib::Response& res) {
               proxy_->handle_models(req, res);
             }));
  http_->Get("/health", guarded(ctx, [&ctx](const httplib::Request&, httplib::Response& res) {
               const bool ok = ctx.pool.any_healthy(WorkerRole::kPrefill) && ctx.pool.any_healthy(WorkerRole::kDecode);
               res.status = ok ? 200 : 503;
               res.set_content(health_json(ctx, ok).dump(), "application/json");
             }));
  http_->Get("/metrics", guarded(ctx, [&ctx](const httplib::Request&, httplib::Response& res) {
               res.set_content(ctx.metrics.render(ctx.pool.snapshot()), "text/plain; version=0.0.4");
             }));

  // Unknown routes, and statuses httplib sets itself (413 body too large, 400 bad request
  // line), get an OpenAI error body.
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      res.set_content(api::error_body(api::route_not_found_error(req.method, req.path)), "application/json");
    } else {
      const std::string message = res.status == 413 ? "request body too large" : "bad request";
      res.set_content(api::error_body(api::ApiError{res.status, "invalid_request_error", message, "", "", 0}),
                      "application/json");
    }
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    api::send_error(res, api::error_for_status(internal_error("internal error")));
  });
}

Status RouterServer::bind() {
  if (ctx_->config.prefill.empty() || ctx_->config.decode.empty())
    return invalid_argument("the router needs at least one prefill and one decode worker");
  const std::string& host = ctx_->config.host;
  api::bind_port_exclusively(*http_);
  const int port = ctx_->config.port == 0 ? http_->bind_to_any_port(host)
                                          : (http_->bind_to_port(host, ctx_->config.port) ? ctx_->config.port : -1);
  if (port <= 0) return unavailable("cannot listen on " + host + ":" + std::to_string(ctx_->config.port));
  port_ = port;
  prober_->probe_all();
  prober_->start();
  return Status::ok();
}

void RouterServer::run() { http_->listen_after_bind(); }

void RouterServer::stop() {
  ctx_->stopping.store(true);
  prober_->stop();
  http_->stop();
}

}  // namespace densa::router
