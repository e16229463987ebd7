// `densa router`: the front door of disaggregated serving. Pairs a prefill and a decode worker
// per request (`densa serve --role prefill|decode`); SIGINT / SIGTERM stop it gracefully.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/command.h"
#include "cli/stop_signals.h"
#include "router/router_server.h"

namespace densa::cli {
namespace {

struct RouterArgs {
  std::string prefill;
  std::string decode;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  int timeout_ms = 300000;
  int connect_timeout_ms = 2000;
  int max_retries = 2;
  int health_interval_ms = 1000;
  int failure_hold_ms = 2000;
  int max_connections = 128;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "densa router: %s\n", message.c_str());
  return 1;
}

int run_router(const RouterArgs& a) {
  router::RouterConfig cfg;
  Result<std::vector<router::WorkerUrl>> prefill = router::parse_worker_list(a.prefill);
  if (!prefill.is_ok()) return fail("--prefill: " + prefill.status().message());
  Result<std::vector<router::WorkerUrl>> decode = router::parse_worker_list(a.decode);
  if (!decode.is_ok()) return fail("--decode: " + decode.status().message());
  cfg.prefill = std::move(prefill).value();
  cfg.decode = std::move(decode).value();
  cfg.host = a.host;
  cfg.port = a.port;
  cfg.api_key = a.api_key;
  cfg.timeout_ms = a.timeout_ms;
  cfg.connect_timeout_ms = a.connect_timeout_ms;
  cfg.max_retries = a.max_retries;
  cfg.health_interval_ms = a.health_interval_ms;
  cfg.failure_hold_ms = a.failure_hold_ms;
  cfg.num_http_threads = a.max_connections;

  const sigset_t stop_signals = block_stop_signals();

  router::RouterServer server(cfg);
  if (Status s = server.bind(); !s.is_ok()) return fail(s.message());
  int healthy_prefill = 0, healthy_decode = 0;
  for (const router::WorkerSnapshot& w : server.context().pool.snapshot())
    (w.role == router::WorkerRole::kPrefill ? healthy_prefill : healthy_decode) += w.healthy ? 1 : 0;
  std::fprintf(stderr, "densa router: %zu prefill (%d healthy), %zu decode (%d healthy), listening on http://%s:%d\n",
               cfg.prefill.size(), healthy_prefill, cfg.decode.size(), healthy_decode, cfg.host.c_str(),
               server.bound_port());

  run_until_stop_signal(stop_signals, "densa router", [&] { server.run(); }, [&] { server.stop(); });
  std::fprintf(stderr, "densa router: stopped\n");
  return 0;
}

const CommandRegistrar kRegister([](CLI::App& app) {
  auto a = std::make_shared<RouterArgs>();
  CLI::App* cmd = app.add_subcommand("router", "front door for disaggregated serving: pairs prefill and decode workers");
  cmd->add_option("--prefill", a->prefill, "prefill workers: http://host:port[,http://host:port...]")->required();
  cmd->add_option("--decode", a->decode, "decode workers: http://host:port[,http://host:port...]")->required();
  cmd->add_option("--host", a->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a->port, "port to listen on (0: any free port, named on the \"listening on\" line)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--api-key", a->api_key, "require 'Authorization: Bearer KEY' on /v1/* (forwarded to the workers)");
  cmd->add_option("--timeout-ms", a->timeout_ms, "longest silence from a worker before the attempt fails")
      ->check(CLI::Range(1, 24 * 3600 * 1000))
      ->capture_default_str();
  cmd->add_option("--connect-timeout-ms", a->connect_timeout_ms, "TCP connect timeout to a worker")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  cmd->add_option("--max-retries", a->max_retries, "extra attempts on other worker pairs before the first byte")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  cmd->add_option("--health-interval-ms", a->health_interval_ms, "GET /health on every worker this often")
      ->check(CLI::Range(10, 600000))
      ->capture_default_str();
  cmd->add_option("--failure-hold-ms", a->failure_hold_ms, "a worker a request failed on stays out at least this long")
      ->check(CLI::Range(0, 3600000))
      ->capture_default_str();
  cmd->add_option("--max-connections", a->max_connections, "client connections served at once")
      ->check(CLI::Range(8, 4096))
      ->capture_default_str();
  cmd->callback([a] {
    if (int rc = run_router(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
});

}  // namespace
}  // namespace densa::cli
