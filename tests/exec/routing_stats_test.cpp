// RoutingStats: the per-step arithmetic on a hand-made routing record, and the counts a real
// server reports in /metrics for the MoE fixture's golden prompts against a count done here,
// independently, from golden.json's router choices.
#include "exec/routing_stats.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <thread>

#include "engine/engine.h"
#include "model/model_loader.h"
#include "server/http_server.h"
#include "test_util.h"

namespace densa {
namespace {

using nlohmann::json;
using testing::model_dir;

TEST(RoutingBalance, ImbalanceAndEntropy) {
  const std::vector<int64_t> even = {3, 3, 3, 3};
  EXPECT_DOUBLE_EQ(routing_balance(even).first, 1.0);
  EXPECT_NEAR(routing_balance(even).second, 1.0, 1e-12);
  const std::vector<int64_t> one_hot = {0, 8, 0, 0};
  EXPECT_DOUBLE_EQ(routing_balance(one_hot).first, 4.0);  // max 8 / mean 2
  EXPECT_NEAR(routing_balance(one_hot).second, 0.0, 1e-12);
  const std::vector<int64_t> half = {2, 2, 0, 0};
  EXPECT_DOUBLE_EQ(routing_balance(half).first, 2.0);
  EXPECT_NEAR(routing_balance(half).second, 0.5, 1e-12);  // ln 2 / ln 4
  const std::vector<int64_t> none = {0, 0, 0, 0};
  EXPECT_EQ(routing_balance(none).first, 0.0);
}

TEST(RoutingStats, RecordsStepsPerLayerAndSkipsDenseLayers) {
  RoutingStats stats(/*num_layers=*/2, /*num_experts=*/4, /*top_k=*/2);
  // Step 1: 2 tokens. Layer 0 routes to {0,1},{0,2}; layer 1 is dense (-1).
  const std::vector<int32_t> step1 = {0, 1, 0, 2, -1, -1, -1, -1};
  stats.record_step(step1, 2, 0.25, 1.0);
  // Step 2: 1 token. Layer 0 -> {3, 0}.
  const std::vector<int32_t> step2 = {3, 0, -1, -1};
  stats.record_step(step2, 1, 0.5, 1.0);
  const RoutingSnapshot s = stats.snapshot();
  EXPECT_EQ(s.num_steps, 2);
  EXPECT_EQ(s.num_tokens, 3);
  EXPECT_EQ(s.layers[0].expert_tokens, (std::vector<int64_t>{3, 1, 1, 1}));
  EXPECT_EQ(s.layers[0].num_steps, 2);
  EXPECT_EQ(s.layers[1].num_steps, 0);
  EXPECT_EQ(s.layers[1].expert_tokens, (std::vector<int64_t>{0, 0, 0, 0}));
  // Step 1 counts {2,1,1,0}: max/mean = 2/1; step 2 {1,0,0,1}: 1/0.5 = 2.
  EXPECT_DOUBLE_EQ(s.layers[0].step_imbalance_sum, 4.0);
  EXPECT_DOUBLE_EQ(s.layers[0].step_imbalance_max, 2.0);
  EXPECT_DOUBLE_EQ(s.layers[0].imbalance(), 3.0 / 1.5);
  EXPECT_DOUBLE_EQ(s.expert_time_share(), 0.375);
}

// Sum of one metric sample (name and labels exactly) in Prometheus text.
double sample(const std::string& text, const std::string& name_and_labels) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name_and_labels + " ", 0) == 0) return std::stod(line.substr(name_and_labels.size() + 1));
  ADD_FAILURE() << name_and_labels << " not in /metrics";
  return -1;
}

// F32 weights and F32 KV reproduce the golden greedy tokens and router choices exactly
// (tests/model/forward_test, tests/engine/engine_golden_test). The engine feeds the prompt
// and the first 47 of the 48 greedy tokens (the last one is sampled, never fed), so each
// layer routes positions 0 .. len(prompt) + 46 of golden's selected_experts, but the last layer,
// which routes only the positions a step samples from: len(prompt) - 1 .. len(prompt) + 46.
TEST(RoutingStatsGolden, MetricsCountsEqualGoldenRouterChoices) {
  auto loaded = load_model(model_dir("tinystories-mixtral-3.6m") / "hf");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const ModelWeights& w = loaded.value();
  EngineConfig ec;
  ec.kv_dtype = DType::kF32;
  ec.routing_stats = true;
  ec.enable_prefix_cache = false;  // every position goes through forward exactly once
  ec.chunked_prefill_size = 8;
  auto engine = Engine::create(w, ec).value();
  server::HttpServerConfig cfg;
  cfg.port = 0;
  cfg.served_model_name = "moe";
  server::HttpServer http(*engine, w, cfg);
  ASSERT_TRUE(http.bind().is_ok());
  std::thread serving([&] { http.run(); });

  const json golden = testing::read_json(model_dir("tinystories-mixtral-3.6m") / "golden" / "golden.json");
  const int L = w.config.num_layers, E = w.config.num_experts;
  std::vector<std::vector<int64_t>> want(L, std::vector<int64_t>(E, 0));
  int64_t sampled = 0;  // positions whose logits were sampled: routed by the last layer
  std::vector<std::thread> clients;
  std::vector<json> responses(golden["prompts"].size());
  for (size_t p = 0; p < golden["prompts"].size(); ++p) {
    const json& g = golden["prompts"][p];
    const int fed = static_cast<int>(g["prompt_ids"].size()) + 47;
    sampled += 48;
    for (int l = 0; l < L; ++l)
      for (int pos = l + 1 < L ? 0 : fed - 48; pos < fed; ++pos)
        for (int e : g["router"]["selected_experts_per_layer_per_position"][l][pos]) ++want[l][e];
    clients.emplace_back([&, p] {
      httplib::Client c("127.0.0.1", http.bound_port());
      c.set_read_timeout(120, 0);
      const json req = {{"prompt", golden["prompts"][p]["prompt_ids"]},
                        {"max_tokens", 48},
                        {"temperature", 0},
                        {"ignore_eos", true}};
      auto r = c.Post("/v1/completions", req.dump(), "application/json");
      if (r && r->status == 200) responses[p] = json::parse(r->body);
    });
  }
  for (auto& t : clients) t.join();
  // Precondition: the served text is the golden one (else routing could legitimately differ).
  const Tokenizer& tok = *w.tokenizer;
  for (size_t p = 0; p < responses.size(); ++p) {
    ASSERT_FALSE(responses[p].is_null()) << "prompt " << p;
    const auto ids = golden["prompts"][p]["prompt_ids"].get<std::vector<TokenId>>();
    auto all = ids;
    for (TokenId t : golden["prompts"][p]["greedy_ids"]) all.push_back(t);
    EXPECT_EQ(responses[p]["choices"][0]["text"].get<std::string>(), tok.decode(all).substr(tok.decode(ids).size()));
  }

  httplib::Client c("127.0.0.1", http.bound_port());
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  int64_t total = 0;
  for (int l = 0; l < L; ++l) {
    for (int e = 0; e < E; ++e) {
      const std::string name = "densa_moe_expert_tokens_total{layer=\"" + std::to_string(l) + "\",expert=\"" +
                               std::to_string(e) + "\"}";
      EXPECT_EQ(sample(m->body, name), static_cast<double>(want[l][e])) << name;
      total += want[l][e];
    }
    // Cumulative imbalance: max / mean of the golden counts.
    int64_t most = 0, sum = 0;
    for (int64_t v : want[l]) {
      most = std::max(most, v);
      sum += v;
    }
    EXPECT_NEAR(sample(m->body, "densa_moe_load_imbalance_ratio{layer=\"" + std::to_string(l) + "\"}"),
                static_cast<double>(most) / (static_cast<double>(sum) / E), 1e-6);
    const double entropy = sample(m->body, "densa_moe_routing_entropy_ratio{layer=\"" + std::to_string(l) + "\"}");
    EXPECT_GT(entropy, 0.0);
    EXPECT_LE(entropy, 1.0);
  }
  EXPECT_EQ((sample(m->body, "densa_moe_routed_tokens_total") * (L - 1) + static_cast<double>(sampled)) *
                w.config.num_experts_per_tok,
            static_cast<double>(total));
  const double share = sample(m->body, "densa_moe_expert_time_share");
  EXPECT_GT(share, 0.0);
  EXPECT_LT(share, 1.0);

  http.stop();
  serving.join();
  engine->shutdown();
}

}  // namespace
}  // namespace densa
