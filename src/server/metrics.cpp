#include "server/metrics.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <span>

namespace densa::server {

namespace {

std::string num(double v) { return api::prometheus_number(v); }

void gauge(std::string& out, const char* name, const char* help, double value) {
  api::append_single(out, name, help, "gauge", num(value));
}

void counter(std::string& out, const char* name, const char* help, double value) {
  api::append_single(out, name, help, "counter", num(value));
}

using api::append_histogram;
using api::append_histogram_family;

// Stages of ChoiceTiming, in the order they happen.
constexpr const char* kStageNames[] = {"tokenize", "queue", "prefill", "kv_transfer", "decode", "engine_other", "respond"};

const std::vector<double> kStageBounds = {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                          0.1,    0.25,   0.5,   1,      2.5,   5,    10,   30};

}  // namespace

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      tpot_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      e2e_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}),
      stages_(std::size(kStageNames), api::Histogram(kStageBounds)),
      prefill_chunk_(kStageBounds),
      decode_step_({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}) {}

void Metrics::observe_stages(const ChoiceTiming& t) {
  const double stage_ms[] = {t.tokenize_ms, t.queue_ms,        t.prefill_ms(), t.kv_transfer_ms,
                             t.decode_ms(), t.engine_other_ms, t.respond_ms};
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t k = 0; k < std::size(stage_ms); ++k) stages_[k].observe(stage_ms[k] / 1000.0);
  for (double v : t.prefill_chunks_ms) prefill_chunk_.observe(v / 1000.0);
  for (double v : t.decode_steps_ms) decode_step_.observe(v / 1000.0);
}

void Metrics::set_quality(const QualityGauges& q) {
  std::lock_guard<std::mutex> lock(mu_);
  quality_ = q;
}

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
  counter(out, "densa_nonfinite_logits_total",
          "Requests refused because a logit row held NaN or inf (never sampled).",
          static_cast<double>(s.nonfinite_logit_rows));
  if (!s.ranks.empty()) {
    // Tensor / expert parallel: one series per rank, as rank 0 last gathered them (with a
    // batch, about once a second while the engine steps).
    auto per_rank = [&](const char* name, const char* type, const char* help, auto value) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
      for (const RankStats& r : s.ranks) out += std::string(name) + "{rank=\"" + std::to_string(r.rank) + "\"} " + num(value(r)) + "\n";
    };
    per_rank("densa_rank_rss_bytes", "gauge", "Resident memory of each rank of the tensor / expert parallel group.",
             [](const RankStats& r) { return static_cast<double>(r.rss_bytes); });
    per_rank("densa_rank_weight_bytes", "gauge", "Weight bytes each rank holds (its slice, as stored).",
             [](const RankStats& r) { return static_cast<double>(r.weight_bytes); });
    per_rank("densa_rank_comm_seconds_total", "counter", "Time each rank spent inside collectives.",
             [](const RankStats& r) { return r.comm_seconds; });
    per_rank("densa_rank_batches_total", "counter", "Forward passes each rank ran.",
             [](const RankStats& r) { return static_cast<double>(r.batches); });
  }
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP densa_http_responses_total API responses by status class.\n"
         "# TYPE densa_http_responses_total counter\n";
  out += "densa_http_responses_total{code=\"2xx\"} " + std::to_string(responses_2xx_) + "\n";
  out += "densa_http_responses_total{code=\"4xx\"} " + std::to_string(responses_4xx_) + "\n";
  out += "densa_http_responses_total{code=\"5xx\"} " + std::to_string(responses_5xx_) + "\n";
  append_histogram(out, "densa_time_to_first_token_seconds", "Time from request arrival to its first token.", ttft_);
  append_histogram(out, "densa_time_per_output_token_seconds", "Mean time between output tokens of a request.", tpot_);
  append_histogram(out, "densa_e2e_request_latency_seconds", "Time from request arrival to its last token.", e2e_);
  append_histogram_family(out, "densa_request_stage_seconds",
                   "Where a finished request's server time went (stages add up to its server time).", "stage",
                   kStageNames, stages_);
  append_histogram(out, "densa_prefill_chunk_seconds", "Engine steps that ran a prompt chunk of a request.", prefill_chunk_);
  append_histogram(out, "densa_decode_step_seconds", "Engine steps that fed a generated token of a request.", decode_step_);
  if (quality_) {
    const QualityGauges& q = *quality_;
    counter(out, "densa_canary_runs_total", "Quality canary scorings so far.", static_cast<double>(q.num_runs));
    gauge(out, "densa_canary_kl_divergence", "Mean per-token KL(baseline || serving) on the canary probe, nats.",
          q.kl_mean);
    gauge(out, "densa_canary_perplexity", "Perplexity of the canary probe at the serving precision.", q.ppl_serving);
    gauge(out, "densa_canary_baseline_perplexity", "Perplexity of the canary probe on the baseline path.",
          q.ppl_baseline);
    gauge(out, "densa_canary_perplexity_delta_ratio", "Serving / baseline perplexity - 1 on the canary probe.",
          q.ppl_delta_ratio);
    gauge(out, "densa_quality_degraded", "1 when the canary crossed its KL or perplexity threshold.",
          q.degraded ? 1 : 0);
  }
  return out;
}

std::string render_routing(const std::optional<RoutingSnapshot>& routing) {
  std::string out;
  if (!routing) return out;
  const RoutingSnapshot& r = *routing;
  counter(out, "densa_moe_routed_steps_total", "Engine steps whose MoE routing was recorded.",
          static_cast<double>(r.num_steps));
  counter(out, "densa_moe_routed_tokens_total", "Tokens routed (each through every MoE layer).",
          static_cast<double>(r.num_tokens));
  out += "# HELP densa_moe_expert_tokens_total Tokens routed to an expert (one per token and top-k slot).\n"
         "# TYPE densa_moe_expert_tokens_total counter\n";
  for (size_t l = 0; l < r.layers.size(); ++l) {
    if (r.layers[l].num_steps == 0) continue;  // a dense layer
    for (size_t e = 0; e < r.layers[l].expert_tokens.size(); ++e) {
      out += "densa_moe_expert_tokens_total{layer=\"" + std::to_string(l) + "\",expert=\"" + std::to_string(e) +
             "\"} " + std::to_string(r.layers[l].expert_tokens[e]) + "\n";
    }
  }
  struct PerLayer {
    const char* name;
    const char* help;
    double (*value)(const LayerRouting&);
  };
  const PerLayer per_layer[] = {
      {"densa_moe_load_imbalance_ratio", "Max / mean tokens per expert since start (1 = balanced).",
       [](const LayerRouting& l) { return l.imbalance(); }},
      {"densa_moe_step_load_imbalance_ratio", "Mean over steps of max / mean tokens per expert in one step.",
       [](const LayerRouting& l) { return l.num_steps > 0 ? l.step_imbalance_sum / l.num_steps : 0.0; }},
      {"densa_moe_step_load_imbalance_ratio_max", "Worst step's max / mean tokens per expert.",
       [](const LayerRouting& l) { return l.step_imbalance_max; }},
      {"densa_moe_step_load_imbalance_ratio_last", "Latest step's max / mean tokens per expert.",
       [](const LayerRouting& l) { return l.step_imbalance_last; }},
      {"densa_moe_routing_entropy_ratio",
       "Mean over steps of the entropy of the step's expert shares / log(experts) (1 = spread evenly).",
       [](const LayerRouting& l) { return l.num_steps > 0 ? l.step_entropy_sum / l.num_steps : 0.0; }},
  };
  for (const PerLayer& m : per_layer) {
    out += std::string("# HELP ") + m.name + " " + m.help + "\n# TYPE " + m.name + " gauge\n";
    for (size_t l = 0; l < r.layers.size(); ++l) {
      if (r.layers[l].num_steps == 0) continue;
      out += std::string(m.name) + "{layer=\"" + std::to_string(l) + "\"} " + num(m.value(r.layers[l])) + "\n";
    }
  }
  counter(out, "densa_moe_expert_gemm_seconds_total", "Forward time spent in the experts' GEMMs.",
          r.expert_gemm_seconds);
  counter(out, "densa_moe_forward_seconds_total", "Forward time of the recorded steps.", r.forward_seconds);
  gauge(out, "densa_moe_expert_time_share", "Share of forward time spent in expert GEMMs since start.",
        r.expert_time_share());
  return out;
}

}  // namespace densa::server
