// Quality canary: score_canary on the MoE fixture (the same path twice is exactly clean, FP8
// KV stays under the default thresholds, 2-bit weights cross them), and the real `densa serve`
// with --canary exporting the gauges: densa_quality_degraded 0 with FP8 KV, 1 with the
// test-only 2-bit weights.
#include "quality/canary.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../e2e/server_process.h"
#include "model/model_loader.h"
#include "test_util.h"

namespace densa {
namespace {

using testing::model_dir;

std::filesystem::path probe_file() {
  static const std::filesystem::path p = [] {
    const std::string text = testing::read_text(testing::data_dir() / "tinystories" / "valid.txt").substr(0, 1200);
    auto path = std::filesystem::temp_directory_path() / ("densa-canary-probe-" + std::to_string(::getpid()) + ".txt");
    std::ofstream(path) << text;
    return path;
  }();
  return p;
}

const std::filesystem::path kModel = model_dir("tinystories-mixtral-3.6m") / "gguf" / "tinystories-mixtral-3.6m-f16.gguf";

ModelWeights load(const LoadOptions& opts = {}) {
  auto r = load_model(kModel, opts);
  CHECK(r.is_ok()) << r.status().to_string();
  return std::move(r).value();
}

TEST(Canary, CleanForSamePathAndFp8KvDegradedForTwoBitWeights) {
  const ModelWeights serving = load();
  LoadOptions bf16;
  bf16.weight_dtype = DType::kBF16;
  const ModelWeights baseline = load(bf16);
  auto probe = load_canary_probe(serving, probe_file().string());
  ASSERT_TRUE(probe.is_ok()) << probe.status().to_string();
  ASSERT_GT(probe->size(), 100u);
  const CanaryThresholds th;

  auto same = score_canary({&baseline, DType::kBF16}, {&baseline, DType::kBF16}, *probe, th);
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ(same->kl_mean, 0.0);
  EXPECT_EQ(same->ppl_delta_ratio, 0.0);
  EXPECT_FALSE(same->degraded);
  EXPECT_EQ(same->num_tokens, static_cast<int64_t>(probe->size()) - 1);

  auto fp8 = score_canary({&serving, DType::kFP8E4M3}, {&baseline, DType::kBF16}, *probe, th);
  ASSERT_TRUE(fp8.is_ok());
  EXPECT_GT(fp8->kl_mean, 0.0);
  EXPECT_LT(fp8->kl_mean, th.max_kl);
  EXPECT_LT(fp8->ppl_delta_ratio, th.max_ppl_delta);
  EXPECT_FALSE(fp8->degraded);

  ModelWeights broken = load();
  ASSERT_TRUE(degrade_weights_for_test(broken, 2).is_ok());
  auto bad = score_canary({&broken, DType::kBF16}, {&baseline, DType::kBF16}, *probe, th);
  ASSERT_TRUE(bad.is_ok());
  EXPECT_GT(bad->kl_mean, th.max_kl);
  EXPECT_TRUE(bad->degraded);
  std::printf("canary KL: fp8 KV %.5f (PPL %+.3f%%), 2-bit weights %.4f (PPL %+.1f%%)\n", fp8->kl_mean,
              100 * fp8->ppl_delta_ratio, bad->kl_mean, 100 * bad->ppl_delta_ratio);

  EXPECT_FALSE(degrade_weights_for_test(broken, 1).is_ok());
  EXPECT_FALSE(load_canary_probe(serving, "/nonexistent/probe.txt").is_ok());
}

// The value of an unlabelled metric, or nullopt.
std::optional<double> metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return std::nullopt;
}

// Polls /metrics until the canary has run twice; returns the body.
std::string metrics_after_canary(testing::ServerProcess& server) {
  std::string body;
  for (int i = 0; i < 600; ++i) {
    body = server.get("/metrics").body;
    if (metric(body, "densa_canary_runs_total").value_or(0) >= 2) return body;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "canary did not run twice:\n" << server.log();
  return body;
}

TEST(CanaryServe, GaugeClearForFp8KvAndFlipsForTwoBitWeights) {
  {
    testing::ServerProcess server({"--kv-dtype", "fp8", "--canary", probe_file().string(), "--canary-every", "0.2"});
    ASSERT_TRUE(server.wait_ready());
    const std::string m = metrics_after_canary(server);
    EXPECT_EQ(metric(m, "densa_quality_degraded"), 0.0) << m;
    EXPECT_LT(metric(m, "densa_canary_kl_divergence").value_or(1), CanaryThresholds{}.max_kl);
    // Serving keeps working while the canary runs.
    auto r = server.post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":4})");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(server.stop(), 0);
  }
  {
    testing::ServerProcess server(
        {"--canary", probe_file().string(), "--canary-every", "0.2", "--test-degrade-weights-bits", "2"});
    ASSERT_TRUE(server.wait_ready());
    const std::string m = metrics_after_canary(server);
    EXPECT_EQ(metric(m, "densa_quality_degraded"), 1.0) << m;
    EXPECT_GT(metric(m, "densa_canary_kl_divergence").value_or(0), CanaryThresholds{}.max_kl);
    EXPECT_NE(server.log().find("canary DEGRADED"), std::string::npos) << server.log();
    EXPECT_EQ(server.stop(), 0);
  }
  {
    testing::ServerProcess server({"--canary", "/nonexistent/probe.txt"});
    // A bad probe is a clear start-up error, not a crash.
    for (int i = 0; i < 100 && server.log().find("--canary") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_NE(server.log().find("densa serve: --canary: cannot read the canary probe"), std::string::npos)
        << server.log();
  }
}

}  // namespace
}  // namespace densa
