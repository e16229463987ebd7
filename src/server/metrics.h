#pragma once
// Metrics: the server's Prometheus counters and latency histograms (thread-safe), rendered
// together with a snapshot of EngineStats as Prometheus text exposition format 0.0.4.
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/prometheus.h"
#include "engine/engine.h"
#include "server/choice_timing.h"

namespace densa::server {

// Latencies of one finished request, seconds; negative = not measured.
struct RequestTiming {
  double ttft_s = -1.0;  // submit -> first token
  double tpot_s = -1.0;  // mean time between output tokens (needs >= 2 tokens)
  double e2e_s = -1.0;   // submit -> last event
};

// The quality canary's latest reading (quality/canary.h), exported as gauges.
struct QualityGauges {
  int64_t num_runs = 0;
  double kl_mean = 0;           // mean per-token KL(P_baseline || P_serving), nats
  double ppl_serving = 0;
  double ppl_baseline = 0;
  double ppl_delta_ratio = 0;   // ppl_serving / ppl_baseline - 1
  bool degraded = false;        // a threshold was crossed
};

class Metrics {
 public:
  Metrics();
  void observe_request(const RequestTiming& timing);
  // Stage times of one finished choice: densa_request_stage_seconds{stage}, one observation
  // per prefill chunk / decode step in densa_prefill_chunk_seconds / densa_decode_step_seconds.
  void observe_stages(const ChoiceTiming& timing);
  void set_quality(const QualityGauges& quality);
  // `code` is the HTTP status sent for an API request.
  void count_response(int code);
  std::string render(const EngineStats& stats) const;

 private:
  mutable std::mutex mu_;
  api::Histogram ttft_;
  api::Histogram tpot_;
  api::Histogram e2e_;
  std::vector<api::Histogram> stages_;  // [kStageNames] per-request stage seconds
  api::Histogram prefill_chunk_;
  api::Histogram decode_step_;
  std::optional<QualityGauges> quality_;  // set once the canary has run
  uint64_t responses_2xx_ = 0;
  uint64_t responses_4xx_ = 0;
  uint64_t responses_5xx_ = 0;
};

// MoE routing load as Prometheus text (per layer and expert); empty for nullopt.
std::string render_routing(const std::optional<RoutingSnapshot>& routing);

}  // namespace densa::server
