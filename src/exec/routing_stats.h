#pragma once
// RoutingStats: MoE routing load, accumulated step by step from forward's routing record
// (ForwardScratch::selected_experts, [num_layers][num_tokens][top_k], -1 in dense layers, which
// stay empty). Per layer it keeps the
// tokens each expert received, the per-step load imbalance (max / mean tokens per expert)
// and the per-step routing entropy (entropy of the step's token share per expert, divided by
// log(num_experts): 1 = perfectly spread, 0 = one expert took everything), plus the time
// forward spent in expert GEMMs. record_step runs on the engine thread (O(layers x tokens x
// top_k) integer increments); snapshot() may be called from any thread.
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace densa {

struct LayerRouting {
  std::vector<int64_t> expert_tokens;  // [num_experts] routed (token, slot) pairs, cumulative
  int64_t num_steps = 0;               // steps that routed tokens through this layer
  double step_imbalance_sum = 0;       // sum over steps of max/mean tokens per expert
  double step_imbalance_max = 0;       // the worst step
  double step_imbalance_last = 0;      // the latest step
  double step_entropy_sum = 0;         // sum over steps of the normalized routing entropy
  double step_entropy_last = 0;

  // max / mean of the cumulative per-expert counts (1 = balanced); 0 before any token.
  double imbalance() const;
};

struct RoutingSnapshot {
  int32_t num_experts = 0;
  int32_t top_k = 0;
  int64_t num_steps = 0;
  int64_t num_tokens = 0;               // tokens routed (each through every layer)
  double expert_gemm_seconds = 0;       // forward time inside the experts' SwiGLU GEMMs
  double forward_seconds = 0;           // forward time of the recorded steps
  std::vector<LayerRouting> layers;     // [num_layers]

  double expert_time_share() const { return forward_seconds > 0 ? expert_gemm_seconds / forward_seconds : 0; }
};

class RoutingStats {
 public:
  RoutingStats(int32_t num_layers, int32_t num_experts, int32_t top_k);

  // selected: [num_layers][num_tokens][top_k] expert ids of one step's batch.
  void record_step(std::span<const int32_t> selected, int64_t num_tokens, double expert_gemm_seconds,
                   double forward_seconds);
  RoutingSnapshot snapshot() const;

 private:
  mutable std::mutex mu_;  // record_step (engine thread) vs snapshot (HTTP threads)
  RoutingSnapshot stats_;
  std::vector<int64_t> step_counts_;  // [num_experts] scratch for one layer of one step
};

// Per-step figures of one layer's expert counts: {max/mean, normalized entropy}.
std::pair<double, double> routing_balance(std::span<const int64_t> expert_tokens);

}  // namespace densa
