// End-to-end: the real `densa bench serve` binary against a live `densa serve` on the MoE
// fixture (a free port, started and stopped by the test): every request succeeds, the token
// counts agree with the server's usage, the metrics are consistent with each other, and the
// result JSON, Markdown summary, plots and --compare output are written.
#include <gtest/gtest.h>

#include <filesystem>

#include "e2e/server_process.h"
#include "test_util.h"

namespace densa::testing {
namespace {

TEST(BenchServeE2e, SweepsConcurrencyAgainstALiveServer) {
  ServerProcess server({"--served-model-name", "tiny-moe"});
  ASSERT_TRUE(server.wait_ready());

  const auto dir = std::filesystem::temp_directory_path() / ("densa_bench_e2e_" + std::to_string(server.port()));
  std::filesystem::remove_all(dir);
  const std::string tokenizer = (model_dir("tinystories-mixtral-3.6m") / "hf" / "tokenizer.model").string();
  const std::string base = std::string(DENSA_BINARY) + " bench serve --base-url http://127.0.0.1:" +
                           std::to_string(server.port()) + " --model tiny-moe --dataset random --input-len 24" +
                           " --output-len 12 --num-prompts 8 --seed 3 --no-progress --tokenizer " +
                           shell_quote(tokenizer) + " --slo-ttft-ms 60000 --slo-tpot-ms 60000";
  int rc = -1;
  const std::string md = run_command(base + " --concurrency 1,4 --out-dir " + shell_quote((dir / "a").string()), &rc);
  ASSERT_EQ(rc, 0) << md << "\nserver log:\n" << server.log();

  const auto j = read_json(dir / "a" / "result.json");
  EXPECT_EQ(j["meta"]["mode"], "concurrency");
  EXPECT_EQ(j["meta"]["tokenizer_free"], false);
  ASSERT_EQ(j["levels"].size(), 2u);
  for (const auto& l : j["levels"]) {
    SCOPED_TRACE("level " + l["level"].dump());
    EXPECT_EQ(l["num_ok"], 8) << l["errors"].dump();
    EXPECT_EQ(l["num_failed"], 0);
    // The prompts encode to exactly 24 tokens; the server adds BOS.
    const int64_t in = l["total_input_tokens"];
    EXPECT_TRUE(in == 8 * 24 || in == 8 * 25) << in;
    const int64_t out = l["total_output_tokens"];
    EXPECT_GT(out, 8);
    EXPECT_LE(out, 8 * 12);
    EXPECT_GT(l["output_throughput"].get<double>(), 0);
    EXPECT_GT(l["ttft_ms"]["mean"].get<double>(), 0);
    EXPECT_LE(l["ttft_ms"]["max"].get<double>(), l["e2e_ms"]["max"].get<double>());
    EXPECT_LE(l["ttft_ms"]["median"].get<double>(), l["ttft_ms"]["p99"].get<double>());
    EXPECT_GT(l["tpot_ms"]["n"].get<int>(), 0);
    EXPECT_GT(l["tpot_ms"]["mean"].get<double>(), 0);
    EXPECT_GT(l["itl_ms"]["n"].get<int>(), 0);
    EXPECT_EQ(l["num_good"], 8);  // generous SLOs
    EXPECT_NEAR(l["goodput"].get<double>(), l["request_throughput"].get<double>(), 1e-9);
    EXPECT_EQ(l["samples"]["ttft_ms"].size(), 8u);
  }
  for (const char* f : {"summary.md", "throughput_vs_concurrency.svg", "tpot_vs_concurrency.svg", "ttft_cdf.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / "a" / f)) << f;
  }
  EXPECT_NE(md.find("| 4 | 8/0 |"), std::string::npos) << md;

  // A second run (request-rate mode is separate; here the same levels again) and the A/B.
  const std::string md_b = run_command(base + " --concurrency 1,4 --out-dir " + shell_quote((dir / "b").string()), &rc);
  ASSERT_EQ(rc, 0) << md_b;
  const std::string cmp = run_command(std::string(DENSA_BINARY) + " bench serve --compare " +
                                          shell_quote((dir / "a" / "result.json").string()) + " " +
                                          shell_quote((dir / "b" / "result.json").string()) + " --compare-json " +
                                          shell_quote((dir / "cmp.json").string()),
                                      &rc);
  ASSERT_EQ(rc, 0) << cmp;
  const auto c = read_json(dir / "cmp.json");
  EXPECT_EQ(c["num_pairs"], 2);
  const auto& tput = c["metrics"]["output_throughput"]["overall"];
  EXPECT_GT(tput["ratio"].get<double>(), 0);
  ASSERT_TRUE(tput["ci95"].is_array());
  EXPECT_LE(tput["ci95"][0].get<double>(), tput["ratio"].get<double>());
  EXPECT_GE(tput["ci95"][1].get<double>(), tput["ratio"].get<double>());

  // Poisson arrivals, tokenizer-free, against the chat endpoint.
  const std::string md_r = run_command(std::string(DENSA_BINARY) + " bench serve --base-url " +
                                           server.url("") + " --endpoint /v1/chat/completions --model tiny-moe" +
                                           " --input-len 10 --output-len 6 --num-prompts 6 --request-rate 20" +
                                           " --tokenizer-free --no-progress --out-dir " +
                                           shell_quote((dir / "r").string()),
                                       &rc);
  ASSERT_EQ(rc, 0) << md_r;
  const auto r = read_json(dir / "r" / "result.json");
  EXPECT_EQ(r["meta"]["mode"], "request_rate");
  EXPECT_EQ(r["levels"][0]["num_ok"], 6) << r["levels"][0]["errors"].dump();
  EXPECT_GT(r["levels"][0]["total_input_tokens"].get<int64_t>(), 0);  // from usage
  EXPECT_TRUE(std::filesystem::exists(dir / "r" / "ttft_cdf.svg"));

  EXPECT_EQ(server.stop(), 0) << server.log();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace densa::testing
