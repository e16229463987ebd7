#pragma once
// RouterConfig + RouterContext: the router's settings and what its handlers share (the
// worker pool, the metrics, the stop flag).
#include <atomic>
#include <string>
#include <vector>

#include "router/router_metrics.h"
#include "router/worker_pool.h"

namespace densa::router {

struct RouterConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port
  std::string api_key;              // empty: no auth on /v1/*
  std::vector<WorkerUrl> prefill;   // at least one
  std::vector<WorkerUrl> decode;    // at least one
  int timeout_ms = 300000;          // longest silence from a worker before the attempt fails
  int connect_timeout_ms = 2000;
  int max_retries = 2;              // extra attempts on other pairs before the first byte
  int health_interval_ms = 1000;    // GET /health on every worker this often
  int failure_hold_ms = 2000;       // a worker a request failed on stays out at least this long
  int num_http_threads = 128;       // client connections served at once (each stream holds one)
  size_t max_body_bytes = 64u << 20;  // larger request bodies get 413
};

struct RouterContext {
  RouterConfig config;
  WorkerPool pool;
  RouterMetrics metrics;
  std::atomic<bool> stopping{false};

  explicit RouterContext(RouterConfig c) : config(std::move(c)), pool(config.prefill, config.decode) {}
};

}  // namespace densa::router
