#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace densa::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t idx = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[idx];
  sum += value;
  ++count;
}

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void gauge(std::string& out, const char* name, const char* help, double value) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + num(value) + "\n";
}

void counter(std::string& out, const char* name, const char* help, double value) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " + num(value) + "\n";
}

void histogram(std::string& out, const char* name, const char* help, const Histogram& h) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    out += std::string(name) + "_bucket{le=\"" + num(h.bounds[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(h.count) + "\n";
  out += std::string(name) + "_sum " + num(h.sum) + "\n";
  out += std::string(name) + "_count " + std::to_string(h.count) + "\n";
}

}  // namespace

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      tpot_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      e2e_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void Metrics::observe_request(const RequestTiming& t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t.ttft_s >= 0) ttft_.observe(t.ttft_s);
  if (t.tpot_s >= 0) tpot_.observe(t.tpot_s);
  if (t.e2e_s >= 0) e2e_.observe(t.e2e_s);
}

void Metrics::count_response(int code) {
  std::lock_guard<std::mutex> lock(mu_);
  if (code < 400) ++responses_2xx_;
  else if (code < 500) ++responses_4xx_;
  else ++responses_5xx_;
}

std::string Metrics::render(const EngineStats& s) const {
  std::string out;
  gauge(out, "densa_requests_running", "Requests in the running batch.", s.num_running);
  gauge(out, "densa_requests_waiting", "Requests queued for admission.", s.num_waiting);
  gauge(out, "densa_kv_pages_used", "KV pages referenced by requests.", s.kv_pages_used);
  gauge(out, "densa_kv_pages_cached", "KV pages held only by the prefix cache.", s.kv_pages_cached);
  gauge(out, "densa_kv_pages_total", "KV pages in the pool.", s.kv_pages_total);
  counter(out, "densa_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.",
          static_cast<double>(s.prefix_cache_hit_tokens));
  counter(out, "densa_prompt_tokens_total", "Prompt tokens processed.", static_cast<double>(s.prompt_tokens_total));
  counter(out, "densa_generation_tokens_total", "Tokens generated.", static_cast<double>(s.generated_tokens_total));
  counter(out, "densa_preemptions_total", "Requests preempted for lack of KV pages.",
          static_cast<double>(s.num_preemptions));
  counter(out, "densa_requests_finished_total", "Requests the engine finished.",
          static_cast<double>(s.requests_finished));
  counter(out, "densa_kv_integrity_violations_total", "Requests failed by the KV integrity check.",
          static_cast<double>(s.kv_integrity_violations));
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP densa_http_responses_total API responses by status class.\n"
         "# TYPE densa_http_responses_total counter\n";
  out += "densa_http_responses_total{code=\"2xx\"} " + std::to_string(responses_2xx_) + "\n";
  out += "densa_http_responses_total{code=\"4xx\"} " + std::to_string(responses_4xx_) + "\n";
  out += "densa_http_responses_total{code=\"5xx\"} " + std::to_string(responses_5xx_) + "\n";
  histogram(out, "densa_time_to_first_token_seconds", "Time from request arrival to its first token.", ttft_);
  histogram(out, "densa_time_per_output_token_seconds", "Mean time between output tokens of a request.", tpot_);
  histogram(out, "densa_e2e_request_latency_seconds", "Time from request arrival to its last token.", e2e_);
  return out;
}

}  // namespace densa::server
