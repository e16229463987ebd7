#pragma once
// Where `densa bench serve`'s latency and the server's MoE load went: the round trip split
// into network + server time (and the server's queue / prefill / decode) per percentile, from
// the stage times a densa server reports when asked ("densa_timing": true, e.g. via
// --extra-body), and the MoE routing load of the run, from the server's /metrics
// (densa_moe_expert_tokens_total, `densa serve --routing-stats`) read before and after.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/bench/bench_serve_report.h"
#include "tools/bench/svg_plot.h"

namespace densa::bench {

// Tokens routed to each expert: [layer][expert].
struct RoutingLoad {
  std::vector<std::vector<int64_t>> expert_tokens;
};

// densa_moe_expert_tokens_total samples of a Prometheus text; nullopt when it has none.
std::optional<RoutingLoad> parse_routing_metrics(const std::string& prometheus_text);
// after - before, per layer and expert (a layer or expert missing in `before` counts from 0).
RoutingLoad routing_delta(const RoutingLoad& after, const std::optional<RoutingLoad>& before);

// Markdown table of p50 / p90 / p99 of client e2e, server, network, queue, prefill and decode
// per level; empty when no level has server stage times.
std::string breakdown_markdown(const BenchMeta& meta, const std::vector<LevelResult>& levels);
nlohmann::json breakdown_json(const LevelMetrics& m);
// Median e2e / server / network / queue / prefill / decode (ms) against the level.
PlotSpec breakdown_plot(const BenchMeta& meta, const std::vector<LevelResult>& levels);

// Per layer: tokens, max/mean (imbalance), the hottest expert and its share, normalized entropy.
std::string routing_markdown(const RoutingLoad& load);
nlohmann::json routing_json(const RoutingLoad& load);
// Share of each layer's tokens per expert (one series per layer; 1/num_experts = balanced).
PlotSpec routing_plot(const RoutingLoad& load);

}  // namespace densa::bench
