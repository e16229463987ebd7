#include "exec/routing_stats.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace densa {

std::pair<double, double> routing_balance(std::span<const int64_t> counts) {
  int64_t total = 0, most = 0;
  for (int64_t c : counts) {
    total += c;
    most = std::max(most, c);
  }
  if (total == 0 || counts.size() < 2) return {0.0, 0.0};
  const double mean = static_cast<double>(total) / static_cast<double>(counts.size());
  double entropy = 0;
  for (int64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(total);
    entropy -= p * std::log(p);
  }
  return {static_cast<double>(most) / mean, entropy / std::log(static_cast<double>(counts.size()))};
}

double LayerRouting::imbalance() const { return routing_balance(expert_tokens).first; }

RoutingStats::RoutingStats(int32_t num_layers, int32_t num_experts, int32_t top_k) {
  CHECK(num_layers >= 0 && num_experts >= 1 && top_k >= 1);
  stats_.num_experts = num_experts;
  stats_.top_k = top_k;
  stats_.layers.resize(static_cast<size_t>(num_layers));
  for (LayerRouting& l : stats_.layers) l.expert_tokens.assign(static_cast<size_t>(num_experts), 0);
  step_counts_.assign(static_cast<size_t>(num_experts), 0);
}

void RoutingStats::record_step(std::span<const int32_t> selected, int64_t num_tokens, double expert_gemm_seconds,
                               double forward_seconds) {
  const int64_t per_layer = num_tokens * stats_.top_k;
  CHECK(static_cast<int64_t>(selected.size()) >= per_layer * static_cast<int64_t>(stats_.layers.size()))
      << "routing record shorter than layers x tokens x top_k";
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t l = 0; l < stats_.layers.size(); ++l) {
    LayerRouting& layer = stats_.layers[l];
    std::fill(step_counts_.begin(), step_counts_.end(), 0);
    const int32_t* ids = selected.data() + static_cast<int64_t>(l) * per_layer;
    int64_t routed = 0;
    for (int64_t j = 0; j < per_layer; ++j) {
      const int32_t e = ids[j];
      if (e < 0 || e >= stats_.num_experts) continue;  // a dense layer's -1
      ++step_counts_[static_cast<size_t>(e)];
      ++routed;
    }
    if (routed == 0) continue;
    ++layer.num_steps;
    for (size_t e = 0; e < step_counts_.size(); ++e) layer.expert_tokens[e] += step_counts_[e];
    const auto [imbalance, entropy] = routing_balance(step_counts_);
    layer.step_imbalance_sum += imbalance;
    layer.step_imbalance_max = std::max(layer.step_imbalance_max, imbalance);
    layer.step_imbalance_last = imbalance;
    layer.step_entropy_sum += entropy;
    layer.step_entropy_last = entropy;
  }
  ++stats_.num_steps;
  stats_.num_tokens += num_tokens;
  stats_.expert_gemm_seconds += expert_gemm_seconds;
  stats_.forward_seconds += forward_seconds;
}

RoutingSnapshot RoutingStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace densa
