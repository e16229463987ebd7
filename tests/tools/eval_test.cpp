// densa eval: the KL / bootstrap arithmetic on hand-checked inputs, the BF16 baseline on the
// MoE fixture reproducing the reference perplexity within 0.1% with KL exactly 0 against
// itself, and the real binary writing its JSON.
#include "quality/perplexity.h"
#include "tools/eval/eval.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include <gtest/gtest.h>

#include "core/cpu_features.h"
#include "test_util.h"

namespace densa {
namespace {

const char* kMoe = "tinystories-mixtral-3.6m";
const char* kDense = "tinystories-llama-1m";

TEST(Eval, BucketsFollowThePowersOfTwo) {
  EXPECT_EQ(eval_buckets(256), (std::vector<std::pair<int, int>>{{0, 31}, {32, 63}, {64, 127}, {128, 254}}));
  EXPECT_EQ(eval_buckets(8), (std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {2, 3}, {4, 6}}));
}

TEST(Eval, KlDivergenceOfKnownDistributions) {
  std::vector<float> p(2), q(2);
  log_softmax_row(std::vector<float>{0.f, 0.f}, p);                  // [1/2, 1/2]
  log_softmax_row(std::vector<float>{0.f, std::log(3.f)}, q);        // [1/4, 3/4]
  EXPECT_NEAR(std::exp(p[0]) + std::exp(p[1]), 1.0, 1e-7);
  EXPECT_NEAR(kl_divergence(p, q), 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), 1e-6);
  EXPECT_EQ(kl_divergence(p, p), 0.0);  // exactly
  std::vector<float> big(1024), lp(1024);
  for (int i = 0; i < 1024; ++i) big[i] = std::sin(i * 0.37f) * 7;
  log_softmax_row(big, lp);
  EXPECT_EQ(kl_divergence(lp, lp), 0.0);
}

TEST(Eval, KlSummaryAndDeltaCi) {
  std::vector<double> kl;
  for (int i = 1000; i >= 1; --i) kl.push_back(i * 1e-3);
  const KlStats s = summarize_kl(kl, 750);
  EXPECT_EQ(s.num_tokens, 1000);
  EXPECT_NEAR(s.mean, 0.5005, 1e-12);
  EXPECT_NEAR(s.median, 0.5005, 1e-12);
  EXPECT_NEAR(s.p99, 0.99001, 1e-9);
  EXPECT_NEAR(s.p999, 0.999001, 1e-9);
  EXPECT_EQ(s.max, 1.0);
  EXPECT_EQ(s.same_top1, 0.75);

  const std::vector<double> base = {10, 12, 9, 11, 10, 13};
  auto [lo, hi] = delta_ppl_ci(base, base, 4, 500, 1);
  EXPECT_EQ(lo, 0.0);
  EXPECT_EQ(hi, 0.0);
  // Every window worse by the same NLL: delta fixed up to the mix of windows resampled.
  std::vector<double> worse = base;
  for (double& v : worse) v += 0.4;  // +0.1 nats per token
  std::tie(lo, hi) = delta_ppl_ci(base, worse, 4, 500, 1);
  const double mean_nll = 65.0 / 24;
  const double point = std::exp(mean_nll + 0.1) - std::exp(mean_nll);
  EXPECT_LE(lo, point);
  EXPECT_GE(hi, point);
  EXPECT_GT(lo, 0.0);
}

TEST(Eval, Bf16BaselineReproducesReferenceAndSelfKlIsZero) {
  const auto ids = testing::validation_ids(kMoe);
  const auto ref = testing::read_json(testing::model_dir(kMoe) / "golden" / "ppl.json")["bf16_rounded_weights_fp32_compute"];
  EvalConfig cfg;
  // The reference rounds every tensor to BF16 (router, norms and embeddings too), which is the
  // hf-bf16 checkpoint as stored; quantize-on-load keeps those in F32 (see the next test).
  cfg.model_path = (testing::model_dir(kMoe) / "hf-bf16").string();
  cfg.weights = {"native+x-f32"};
  cfg.kv = {"f32", "bf16"};
  cfg.baseline = {"native+x-f32", "f32"};  // the reference computes in fp32 throughout
  cfg.bootstrap_resamples = 200;
  ThreadPool pool(0);
  auto report = run_eval(cfg, ids, &pool, [](const std::string&) {});
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  const EvalReport& r = report.value();
  ASSERT_EQ(r.num_windows, 64);
  ASSERT_EQ(r.results.size(), 2u);
  const EvalComboResult& base = r.results[0];
  ASSERT_TRUE(base.is_baseline);
  ASSERT_TRUE(base.error.empty()) << base.error;
  const double want_all = ref["all_positions"]["ppl"].get<double>();
  const double want_half = ref["second_half"]["ppl"].get<double>();
  EXPECT_NEAR(base.ppl, want_all, want_all * 1e-3);
  EXPECT_NEAR(base.ppl_second_half, want_half, want_half * 1e-3);
  EXPECT_EQ(base.num_tokens, 16320);
  // Against itself: exactly zero, everywhere.
  EXPECT_EQ(base.kl.num_tokens, 16320);
  EXPECT_EQ(base.kl.max, 0.0);
  EXPECT_EQ(base.kl.mean, 0.0);
  EXPECT_EQ(base.kl.same_top1, 1.0);
  EXPECT_EQ(base.delta_ppl, 0.0);
  EXPECT_EQ(base.delta_ppl_lo, 0.0);
  EXPECT_EQ(base.delta_ppl_hi, 0.0);
  ASSERT_EQ(base.buckets.size(), 4u);
  for (const EvalBucket& b : base.buckets) EXPECT_EQ(b.kl.max, 0.0);
  // BF16 KV: a small, non-zero cost.
  const EvalComboResult& kv16 = r.results[1];
  ASSERT_TRUE(kv16.error.empty()) << kv16.error;
  EXPECT_EQ(kv16.combo.kv, "bf16");
  EXPECT_GT(kv16.kl.mean, 0.0);
  EXPECT_LT(kv16.kl.mean, 1e-2);
  EXPECT_GT(kv16.kl.same_top1, 0.95);
  EXPECT_LT(std::fabs(kv16.delta_ppl), 0.01 * want_all);
  EXPECT_LE(kv16.delta_ppl_lo, kv16.delta_ppl);
  EXPECT_GE(kv16.delta_ppl_hi, kv16.delta_ppl);
  int64_t bucket_tokens = 0;
  for (const EvalBucket& b : kv16.buckets) bucket_tokens += b.num_tokens;
  EXPECT_EQ(bucket_tokens, 16320);
}

// BF16 and F16 matrices on AMX tiles (x rounded to bf16, the default where AMX-BF16 is granted)
// against the same checkpoint with fp32 activations ("+x-f32"): a real, small cost, an order of
// magnitude under FP8 weights' (docs/performance/accuracy.md). Without AMX both names run the same
// kernels, and the candidate equals the baseline exactly. The MoE's BF16 checkpoint and the
// dense model's F16 GGUF.
class EvalHalfOnAmx : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(EvalHalfOnAmx, CostsLittleAgainstFp32Activations) {
  const auto [model, file] = GetParam();
  const auto ids = testing::validation_ids(model);
  EvalConfig cfg;
  cfg.model_path = (testing::model_dir(model) / file).string();
  cfg.weights = {"native"};
  cfg.kv = {"f32"};
  cfg.baseline = {"native+x-f32", "f32"};
  cfg.max_windows = 16;
  cfg.bootstrap_resamples = 100;
  ThreadPool pool(2);
  auto report = run_eval(cfg, ids, &pool, [](const std::string&) {});
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  const EvalReport& r = report.value();
  ASSERT_EQ(r.results.size(), 2u);
  const EvalComboResult& a16 = r.results[1];
  ASSERT_TRUE(a16.error.empty()) << a16.error;
  EXPECT_EQ(a16.combo.weights, "native");
  const bool amx = cpu_use_amx() && cpu_isa() == CpuIsa::kAvx512Bf16;
  EXPECT_EQ(matmul_bf16_on_amx(), amx) << "run_eval leaves the process default behind";
  if (amx) {
    EXPECT_GT(a16.kl.mean, 0.0);
    EXPECT_LT(a16.kl.mean, 2e-3);
    EXPECT_GT(a16.kl.same_top1, 0.99);
    EXPECT_LT(std::fabs(a16.delta_ppl), 0.005 * r.results[0].ppl);
  } else {
    EXPECT_EQ(a16.kl.max, 0.0);
    EXPECT_EQ(a16.delta_ppl, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EvalHalfOnAmx,
                         ::testing::Values(std::make_pair(kMoe, "hf-bf16"),
                                           std::make_pair(kDense, "gguf/tinystories-llama-1m-f16.gguf")));

// "BODY+head-HEAD" names quantize lm_head apart from the body; against a baseline with the same
// body they measure the head's own cost, which grows as the head's format narrows.
TEST(Eval, HeadSuffixQuantizesLmHeadAlone) {
  const auto ids = testing::validation_ids(kDense);
  EvalConfig cfg;
  cfg.model_path = (testing::model_dir(kDense) / "hf").string();
  cfg.weights = {"bf16+head-bf16", "bf16+head-fp8", "bf16+head-int4-g32", "bf16+head-int4"};
  cfg.kv = {"f32"};
  cfg.baseline = {"bf16", "f32"};  // lm_head as stored (F32)
  cfg.max_windows = 4;
  cfg.bootstrap_resamples = 50;
  ThreadPool pool(2);
  auto report = run_eval(cfg, ids, &pool, [](const std::string&) {});
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  const EvalReport& r = report.value();
  ASSERT_EQ(r.results.size(), 5u);
  std::vector<double> kl;
  for (size_t i = 1; i < r.results.size(); ++i) {
    const EvalComboResult& c = r.results[i];
    ASSERT_TRUE(c.error.empty()) << c.combo.name() << ": " << c.error;
    EXPECT_EQ(c.combo.weights, cfg.weights[i - 1]);
    kl.push_back(c.kl.mean);
  }
  EXPECT_GT(kl[0], 0.0);   // F32 -> BF16 head: not free, but tiny
  EXPECT_LT(kl[0], 1e-4);
  EXPECT_GT(kl[1], kl[0]);  // FP8
  EXPECT_GT(kl[2], kl[1]);  // INT4 g32
  EXPECT_GT(kl[3], kl[2]);  // INT4 g128 (plain "int4")
  EXPECT_LT(kl[3], 0.05);

  cfg.weights = {"bf16+head-int3"};
  auto bad = run_eval(cfg, ids, &pool, [](const std::string&) {});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("weights 'bf16+head-int3': the lm_head format must be"), std::string::npos)
      << bad.status().message();
  cfg.weights = {"int5+head-fp8"};
  bad = run_eval(cfg, ids, &pool, [](const std::string&) {});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("the body format must be"), std::string::npos) << bad.status().message();
}

// "+int4-LAYOUT" picks how Q4_0 / INT4 g32 matrices are held: the 16-row tiles (exact group
// sums) and the 8-row tiles (per-lane sums) score the same quantized model within rounding of
// each other, and not identically; an unknown layout is refused by name.
TEST(Eval, Int4LayoutSuffixPicksTheKernelArithmetic) {
  const auto ids = testing::validation_ids(kDense);
  EvalConfig cfg;
  cfg.model_path = (testing::model_dir(kDense) / "hf").string();
  cfg.kv = {"f32"};
  cfg.baseline = {"bf16", "f32"};
  cfg.max_windows = 4;
  cfg.bootstrap_resamples = 50;
  ThreadPool pool(2);
  std::vector<std::string> layouts;
  for (const char* l : {"rows", "tiles8", "tiles16"}) {
    const WeightLayout w = std::string(l) == "rows"     ? WeightLayout::kRows
                           : std::string(l) == "tiles8" ? WeightLayout::kInt4Tiles8
                                                        : WeightLayout::kInt4Tiles16;
    if (matmul_runs_int4_layout(w)) layouts.push_back(std::string("q4_0+head-q4_0+int4-") + l);
  }
  cfg.weights = layouts;
  auto report = run_eval(cfg, ids, &pool, [](const std::string&) {});
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  const EvalReport& r = report.value();
  ASSERT_EQ(r.results.size(), layouts.size() + 1);
  std::vector<double> ppl;
  for (size_t i = 1; i < r.results.size(); ++i) {
    ASSERT_TRUE(r.results[i].error.empty()) << r.results[i].error;
    ppl.push_back(r.results[i].ppl);
  }
  for (size_t i = 1; i < ppl.size(); ++i) EXPECT_NEAR(ppl[i], ppl[0], 1e-3 * ppl[0]) << layouts[i];
  if (layouts.size() == 3) {
    EXPECT_EQ(ppl[0], ppl[1]);  // rows and 8-row tiles: the same bits
    EXPECT_NE(ppl[0], ppl[2]);  // 16-row tiles round differently
  }
  cfg.weights = {"q4_0+int4-tiles4"};
  auto bad = run_eval(cfg, ids, &pool, [](const std::string&) {});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("+int4-tiles4 (rows, tiles8 or tiles16)"), std::string::npos)
      << bad.status().message();
}

TEST(Eval, CliWritesJsonAndMarkdown) {
  const auto dir = std::filesystem::temp_directory_path() / ("densa_eval_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cmd = std::string(DENSA_BINARY) + " eval -m " + (testing::model_dir(kMoe) / "hf").string() +
                          " --ids " + (testing::model_dir(kMoe) / "golden" / "valid.ids.u16.bin").string() +
                          " --weights bf16,native --kv bf16 --baseline bf16/bf16 --max-windows 2 --bootstrap 50" +
                          " --json " + (dir / "e.json").string() + " --markdown " + (dir / "e.md").string() +
                          " > " + (dir / "out.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << testing::read_text(dir / "out.txt");
  const auto j = testing::read_json(dir / "e.json");
  EXPECT_EQ(j["baseline"], "bf16/bf16");
  EXPECT_EQ(j["num_windows"], 2);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["kl"]["max"].get<double>(), 0.0);
  EXPECT_EQ(j["results"][1]["weights"], "native");
  EXPECT_GT(j["results"][1]["kl"]["mean"].get<double>(), 0.0);
  EXPECT_EQ(j["results"][1]["by_position"].size(), 4u);
  EXPECT_NE(testing::read_text(dir / "e.md").find("| bf16/bf16 (baseline) |"), std::string::npos);
  EXPECT_NE(testing::read_text(dir / "out.txt").find("pos 128-254"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace densa

namespace densa {
namespace {

// Weights "file:PATH" score another checkpoint of the same model against the baseline: the
// baseline's own file again gives KL 0 and its perplexity; the F32 file of the F16 fixture a
// small, non-zero KL; a missing file fails that candidate alone; "file:" with no path is refused.
TEST(Eval, FileWeightsScoreAnotherCheckpoint) {
  const auto ids = testing::validation_ids(kDense);
  const auto gguf = testing::model_dir(kDense) / "gguf";
  const std::string f16 = (gguf / "tinystories-llama-1m-f16.gguf").string();
  EvalConfig cfg;
  cfg.model_path = f16;
  cfg.weights = {"file:" + f16, "file:" + (gguf / "tinystories-llama-1m-f32.gguf").string(), "file:/nonexistent.gguf"};
  cfg.kv = {"f32"};
  cfg.baseline = {"native", "f32"};
  cfg.max_windows = 2;
  cfg.bootstrap_resamples = 20;
  ThreadPool pool(2);
  auto report = run_eval(cfg, ids, &pool, [](const std::string&) {});
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  const EvalReport& r = report.value();
  ASSERT_EQ(r.results.size(), 4u);
  const EvalComboResult &self = r.results[1], &f32 = r.results[2], &missing = r.results[3];
  ASSERT_TRUE(self.error.empty()) << self.error;
  EXPECT_EQ(self.kl.mean, 0.0);
  EXPECT_EQ(self.ppl, r.results[0].ppl);
  ASSERT_TRUE(f32.error.empty()) << f32.error;
  EXPECT_GT(f32.kl.mean, 0.0);
  EXPECT_LT(f32.kl.mean, 1e-3);
  EXPECT_NE(missing.error.find("/nonexistent.gguf"), std::string::npos) << missing.error;

  cfg.weights = {"file:"};
  auto bad = run_eval(cfg, ids, &pool, [](const std::string&) {});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("no path after 'file:'"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace densa
