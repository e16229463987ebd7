#pragma once
// RouterServer: the front door of disaggregated serving (cpp-httplib). Routes
//   POST /v1/completions, POST /v1/chat/completions (CompletionProxy), GET /v1/models,
//   GET /health (200 while at least one prefill and one decode worker are healthy, else 503;
//   per-worker JSON either way), GET /metrics (RouterMetrics),
// checks the Bearer key on /v1/* when one is configured, probes the workers' /health in the
// background (HealthProber) and turns every failure (and any exception) into an OpenAI error.
#include <memory>

#include "core/status.h"
#include "router/router_context.h"

namespace httplib {
class Server;
}

namespace densa::router {

class CompletionProxy;
class HealthProber;

class RouterServer {
 public:
  explicit RouterServer(RouterConfig config);
  ~RouterServer();
  RouterServer(const RouterServer&) = delete;
  RouterServer& operator=(const RouterServer&) = delete;

  // Probes every worker once, then binds the listening socket.
  Status bind();
  int bound_port() const { return port_; }
  // Serves until stop(); returns after in-flight handlers have finished.
  void run();
  // Thread-safe; open streams end with an error event.
  void stop();

  const RouterContext& context() const { return *ctx_; }

 private:
  void register_routes();

  std::unique_ptr<RouterContext> ctx_;
  std::unique_ptr<CompletionProxy> proxy_;
  std::unique_ptr<HealthProber> prober_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
};

}  // namespace densa::router
