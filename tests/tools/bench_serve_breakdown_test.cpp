// bench serve's latency split and routing summary: the densa_timing of a final chunk reaches the
// record, network = e2e - server per request, routing counters parse and subtract, and the
// Markdown / plot builders use them.
#include "tools/bench/bench_serve_breakdown.h"

#include <gtest/gtest.h>

#include "tools/bench/bench_serve_client.h"

namespace densa::bench {
namespace {

TEST(BenchBreakdown, FinalChunkTimingParses) {
  const StreamChunk c = parse_stream_chunk(
      R"({"choices":[{"index":0,"text":"","finish_reason":"length","densa_timing":{"server_ms":40,"queue_ms":1,"prefill_ms":9,"decode_ms":28}}]})");
  ASSERT_TRUE(c.server);
  EXPECT_DOUBLE_EQ(c.server->server_s, 0.040);
  EXPECT_DOUBLE_EQ(c.server->queue_s, 0.001);
  EXPECT_DOUBLE_EQ(c.server->prefill_s, 0.009);
  EXPECT_DOUBLE_EQ(c.server->decode_s, 0.028);
  EXPECT_FALSE(parse_stream_chunk(R"({"choices":[{"index":0,"text":"a","finish_reason":null}]})").server);
}

TEST(BenchBreakdown, NetworkIsRoundTripMinusServerPerRequest) {
  std::vector<RequestRecord> records(3);
  const double e2e[] = {0.100, 0.200, 0.300}, server[] = {0.090, 0.150, 0.290};
  for (int i = 0; i < 3; ++i) {
    records[i].ok = true;
    records[i].output_tokens = 4;
    records[i].ttft_s = 0.01;
    records[i].e2e_s = e2e[i];
    records[i].server = ServerStages{server[i], 0.001 * i, 0.002, server[i] - 0.003};
  }
  records.push_back(records[0]);
  records.back().server.reset();  // a request without stage times is left out of the split
  const LevelMetrics m = compute_level_metrics(records, 1.0, {});
  EXPECT_EQ(m.e2e_ms.n, 4);
  EXPECT_EQ(m.server_ms.n, 3);
  EXPECT_NEAR(m.network_ms.median, 10.0, 1e-9);  // {10, 50, 10}
  EXPECT_NEAR(m.network_ms.max, 50.0, 1e-9);
  EXPECT_NEAR(m.server_ms.median, 150.0, 1e-9);

  BenchMeta meta;
  LevelResult lr{m, {}};
  const std::string md = breakdown_markdown(meta, {lr});
  EXPECT_NE(md.find("Latency breakdown"), std::string::npos);
  EXPECT_NE(md.find("| p50 |"), std::string::npos);
  EXPECT_TRUE(breakdown_markdown(meta, {LevelResult{compute_level_metrics({}, 1.0, {}), {}}}).empty());
}

TEST(BenchBreakdown, RoutingMetricsParseAndSubtract) {
  const std::string before =
      "# TYPE densa_moe_expert_tokens_total counter\n"
      "densa_moe_expert_tokens_total{layer=\"0\",expert=\"0\"} 5\n"
      "densa_moe_expert_tokens_total{layer=\"0\",expert=\"1\"} 3\n";
  const std::string after =
      "densa_moe_expert_tokens_total{layer=\"0\",expert=\"0\"} 25\n"
      "densa_moe_expert_tokens_total{layer=\"0\",expert=\"1\"} 8\n"
      "densa_moe_expert_tokens_total{layer=\"1\",expert=\"0\"} 4\n"
      "densa_moe_expert_tokens_total{layer=\"1\",expert=\"1\"} 4\n"
      "densa_moe_routed_steps_total 9\n";
  const auto b = parse_routing_metrics(before), a = parse_routing_metrics(after);
  ASSERT_TRUE(a && b);
  const RoutingLoad d = routing_delta(*a, b);
  ASSERT_EQ(d.expert_tokens.size(), 2u);
  EXPECT_EQ(d.expert_tokens[0], (std::vector<int64_t>{20, 5}));
  EXPECT_EQ(d.expert_tokens[1], (std::vector<int64_t>{4, 4}));
  EXPECT_FALSE(parse_routing_metrics("densa_requests_running 0\n"));
  const nlohmann::json j = routing_json(d);
  EXPECT_DOUBLE_EQ(j["layers"][0]["imbalance"].get<double>(), 20.0 / 12.5);
  EXPECT_DOUBLE_EQ(j["layers"][1]["imbalance"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["layers"][1]["entropy_ratio"].get<double>(), 1.0);
  const PlotSpec p = routing_plot(d);
  ASSERT_EQ(p.series.size(), 3u);  // two layers + the balanced line
  EXPECT_DOUBLE_EQ(p.series[0].y[0], 0.8);
  EXPECT_NE(routing_markdown(d).find("| 0 | 25 | 1.60 | 0 (80.0%) | 20.0% |"), std::string::npos) << routing_markdown(d);
}

}  // namespace
}  // namespace densa::bench
