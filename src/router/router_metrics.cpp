#include "router/router_metrics.h"

#include <cstdio>

namespace densa::router {
namespace {

std::string num(double v) { return api::prometheus_number(v); }

void header(std::string& out, const char* name, const char* help, const char* type) {
  api::append_family_header(out, name, help, type);
}

void counter(std::string& out, const char* name, const char* help, uint64_t value) {
  api::append_single(out, name, help, "counter", std::to_string(value));
}

// One gauge family with a sample per worker.
template <typename F>
void worker_gauge(std::string& out, const char* name, const char* help, const std::vector<WorkerSnapshot>& workers,
                  F value) {
  header(out, name, help, "gauge");
  for (const WorkerSnapshot& w : workers)
    out += std::string(name) + "{role=\"" + worker_role_name(w.role) + "\",url=\"" + w.url + "\"} " + num(value(w)) + "\n";
}

}  // namespace

RouterMetrics::RouterMetrics()
    : first_byte_({0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      upstream_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void RouterMetrics::count_request() {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_;
}

void RouterMetrics::count_response(int code) {
  std::lock_guard<std::mutex> lock(mu_);
  if (code < 400) ++responses_2xx_;
  else if (code < 500) ++responses_4xx_;
  else ++responses_5xx_;
}

void RouterMetrics::count_retry() {
  std::lock_guard<std::mutex> lock(mu_);
  ++retries_;
}

void RouterMetrics::count_upstream_failure() {
  std::lock_guard<std::mutex> lock(mu_);
  ++upstream_failures_;
}

void RouterMetrics::count_stream_failure() {
  std::lock_guard<std::mutex> lock(mu_);
  ++stream_failures_;
}

void RouterMetrics::count_client_disconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  ++client_disconnects_;
}

void RouterMetrics::observe_first_byte(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  first_byte_.observe(s);
}

void RouterMetrics::observe_upstream(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  upstream_.observe(s);
}

std::string RouterMetrics::render(const std::vector<WorkerSnapshot>& workers) const {
  std::string out;
  worker_gauge(out, "densa_router_worker_healthy", "1 if the worker is in rotation.", workers,
               [](const WorkerSnapshot& w) { return w.healthy ? 1.0 : 0.0; });
  worker_gauge(out, "densa_router_worker_tokens_in_flight", "Tokens the router has in flight on the worker.", workers,
               [](const WorkerSnapshot& w) { return static_cast<double>(w.tokens_in_flight); });
  worker_gauge(out, "densa_router_worker_requests_in_flight", "Requests the router has in flight on the worker.",
               workers, [](const WorkerSnapshot& w) { return static_cast<double>(w.requests_in_flight); });
  worker_gauge(out, "densa_router_worker_failures", "Request failures the router blamed on the worker.", workers,
               [](const WorkerSnapshot& w) { return static_cast<double>(w.failures); });
  std::lock_guard<std::mutex> lock(mu_);
  counter(out, "densa_router_requests_total", "Completion requests received.", requests_);
  header(out, "densa_router_responses_total", "Responses by status class.", "counter");
  out += "densa_router_responses_total{code=\"2xx\"} " + std::to_string(responses_2xx_) + "\n";
  out += "densa_router_responses_total{code=\"4xx\"} " + std::to_string(responses_4xx_) + "\n";
  out += "densa_router_responses_total{code=\"5xx\"} " + std::to_string(responses_5xx_) + "\n";
  counter(out, "densa_router_retries_total", "Attempts retried on another worker pair.", retries_);
  counter(out, "densa_router_upstream_failures_total", "Attempts that failed on a worker.", upstream_failures_);
  counter(out, "densa_router_stream_failures_total", "Streams cut by a worker failure after the first byte.",
          stream_failures_);
  counter(out, "densa_router_client_disconnects_total", "Clients that left before their response ended.",
          client_disconnects_);
  api::append_histogram(out, "densa_router_upstream_first_byte_seconds", "Time from forwarding to a worker's first body byte.",
            first_byte_);
  api::append_histogram(out, "densa_router_upstream_seconds", "Time from forwarding to the end of a worker's response.", upstream_);
  return out;
}

}  // namespace densa::router
