// The benchmark's metric code on synthetic request streams with answers worked out by hand:
// percentiles, TPOT excluding the first token, ITL, throughput, goodput, and the A/B ratio
// confidence intervals.
#include "tools/bench/bench_serve_metrics.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace densa::bench {
namespace {

// A request whose first token arrives at ttft and the remaining n-1 at a fixed gap.
RequestRecord steady_request(double start, double ttft, int n, double gap, int64_t prompt = 10) {
  RequestRecord r;
  r.ok = true;
  r.start_s = start;
  r.ttft_s = ttft;
  r.prompt_tokens = prompt;
  r.output_tokens = n;
  for (int i = 1; i < n; ++i) r.itl_s.push_back(gap);
  r.e2e_s = ttft + gap * (n - 1);
  return r;
}

TEST(BenchMetrics, PercentilesInterpolateLinearly) {
  const std::vector<double> five = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(percentile_sorted(five, 0.0), 1);
  EXPECT_DOUBLE_EQ(percentile_sorted(five, 0.5), 3);
  EXPECT_DOUBLE_EQ(percentile_sorted(five, 0.9), 4.6);
  EXPECT_DOUBLE_EQ(percentile_sorted(five, 0.99), 4.96);
  EXPECT_DOUBLE_EQ(percentile_sorted(five, 1.0), 5);
  EXPECT_DOUBLE_EQ(percentile_sorted(std::vector<double>{7}, 0.99), 7);
  EXPECT_EQ(percentile_sorted({}, 0.5), 0);

  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);  // unsorted on purpose: summarize sorts
  const Distribution d = summarize(hundred);
  EXPECT_EQ(d.n, 100);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_DOUBLE_EQ(d.median, 50.5);
  EXPECT_NEAR(d.p90, 90.1, 1e-12);
  EXPECT_NEAR(d.p99, 99.01, 1e-12);
  EXPECT_EQ(d.min, 1);
  EXPECT_EQ(d.max, 100);
  EXPECT_NEAR(d.stddev, std::sqrt(100.0 * 101 / 12), 1e-9);  // sample sd of 1..n = sqrt(n(n+1)/12)
  EXPECT_EQ(summarize({}).n, 0);
}

TEST(BenchMetrics, TpotExcludesTheFirstToken) {
  // First token after 500 ms, then 9 more every 100 ms: e2e = 1.4 s.
  const RequestRecord r = steady_request(0, 0.5, 10, 0.1);
  ASSERT_TRUE(tpot_s(r).has_value());
  EXPECT_NEAR(*tpot_s(r), 0.1, 1e-12);           // (1.4 - 0.5) / 9
  EXPECT_GT(r.e2e_s / r.output_tokens, 0.139);   // e2e / n would be 140 ms
  // One output token: TPOT is undefined; a failed request has none either.
  EXPECT_FALSE(tpot_s(steady_request(0, 0.3, 1, 0)).has_value());
  RequestRecord failed = r;
  failed.ok = false;
  EXPECT_FALSE(tpot_s(failed).has_value());
}

TEST(BenchMetrics, LevelMetricsFromASyntheticStream) {
  std::vector<RequestRecord> rs = {steady_request(0, 0.5, 10, 0.1, 20),   // tpot 100 ms, itl 9 x 100
                                   steady_request(0.2, 0.3, 5, 0.05, 30),  // tpot 50 ms, itl 4 x 50
                                   steady_request(0.4, 0.2, 1, 0.0, 40)};  // no tpot, no itl
  RequestRecord failed;
  failed.error = "HTTP 500";
  rs.push_back(failed);
  const LevelMetrics m = compute_level_metrics(rs, 2.0, Slo{});
  EXPECT_EQ(m.num_requests, 4);
  EXPECT_EQ(m.num_ok, 3);
  EXPECT_EQ(m.num_failed, 1);
  EXPECT_EQ(m.total_input_tokens, 90);
  EXPECT_EQ(m.total_output_tokens, 16);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.input_throughput, 45);
  EXPECT_DOUBLE_EQ(m.output_throughput, 8);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 53);
  EXPECT_EQ(m.ttft_ms.n, 3);
  EXPECT_NEAR(m.ttft_ms.mean, (500 + 300 + 200) / 3.0, 1e-9);
  EXPECT_NEAR(m.ttft_ms.median, 300, 1e-9);
  EXPECT_EQ(m.tpot_ms.n, 2);
  EXPECT_NEAR(m.tpot_ms.mean, 75, 1e-9);
  EXPECT_EQ(m.itl_ms.n, 13);
  EXPECT_NEAR(m.itl_ms.mean, (9 * 100 + 4 * 50) / 13.0, 1e-9);
  EXPECT_NEAR(m.itl_ms.median, 100, 1e-9);
  EXPECT_NEAR(m.itl_ms.min, 50, 1e-9);
  EXPECT_NEAR(m.e2e_ms.max, 1400, 1e-9);
  EXPECT_EQ(m.num_good, 3);  // no SLO: every successful request is good
}

TEST(BenchMetrics, GoodputCountsRequestsMeetingEverySlo) {
  const std::vector<RequestRecord> rs = {
      steady_request(0, 0.10, 11, 0.010),  // ttft 100, tpot 10: good
      steady_request(0, 0.30, 11, 0.010),  // ttft 300 > 250: bad
      steady_request(0, 0.10, 11, 0.050),  // tpot 50 > 15.625: bad
      steady_request(0, 0.15, 1, 0.0),     // ttft 150, TPOT undefined: good
      steady_request(0, 0.25, 3, 0.015625),  // exactly at both bounds (binary-exact): good
      RequestRecord{},                     // failed: never good
  };
  const Slo slo{250.0, 15.625};
  EXPECT_TRUE(meets_slo(rs[0], slo));
  EXPECT_FALSE(meets_slo(rs[1], slo));
  EXPECT_FALSE(meets_slo(rs[2], slo));
  EXPECT_TRUE(meets_slo(rs[3], slo));
  EXPECT_TRUE(meets_slo(rs[4], slo));
  EXPECT_FALSE(meets_slo(rs[5], slo));
  const LevelMetrics m = compute_level_metrics(rs, 4.0, slo);
  EXPECT_EQ(m.num_good, 3);
  EXPECT_DOUBLE_EQ(m.goodput, 0.75);
  // Only a TTFT bound: the slow-decoding request passes.
  EXPECT_EQ(compute_level_metrics(rs, 4.0, Slo{250.0, std::nullopt}).num_good, 4);
}

TEST(BenchMetrics, StudentTQuantiles) {
  EXPECT_NEAR(student_t975(1), 12.7062, 1e-4);
  EXPECT_NEAR(student_t975(10), 2.2281, 1e-4);
  EXPECT_NEAR(student_t975(30), 2.0423, 1e-4);
  EXPECT_NEAR(student_t975(40), 2.0211, 2e-4);
  EXPECT_NEAR(student_t975(120), 1.9799, 2e-4);
  EXPECT_NEAR(student_t975(100000), 1.96, 1e-3);
}

TEST(BenchMetrics, PairedRatioCiIsTBasedOnLogRatios) {
  const std::vector<double> a = {10, 10, 10}, b = {20, 20, 20};
  RatioCi r = paired_ratio_ci(a, b);
  EXPECT_TRUE(r.has_ci);
  EXPECT_EQ(r.n, 3);
  EXPECT_NEAR(r.ratio, 2, 1e-12);
  EXPECT_NEAR(r.lo, 2, 1e-12);
  EXPECT_NEAR(r.hi, 2, 1e-12);

  // Ratios 2 and 8: geometric mean 4; log-ratio sd = ln4/sqrt2, se = ln2, t(1) = 12.7062.
  r = paired_ratio_ci(std::vector<double>{1, 1}, std::vector<double>{2, 8});
  EXPECT_NEAR(r.ratio, 4, 1e-12);
  EXPECT_NEAR(r.lo, 4 * std::pow(2.0, -12.7062), 1e-9);
  EXPECT_NEAR(r.hi, 4 * std::pow(2.0, 12.7062), 1e-3 * 4 * std::pow(2.0, 12.7062));

  // One pair: a ratio but no interval.
  r = paired_ratio_ci(std::vector<double>{5}, std::vector<double>{6});
  EXPECT_NEAR(r.ratio, 1.2, 1e-12);
  EXPECT_FALSE(r.has_ci);
}

TEST(BenchMetrics, BootstrapRatioCi) {
  // Constant samples: no spread, the interval collapses to the ratio.
  const std::vector<double> ca(20, 4.0), cb(30, 6.0);
  RatioCi r = bootstrap_ratio_ci(ca, cb, Statistic::kMean, 500, 1);
  EXPECT_TRUE(r.has_ci);
  EXPECT_DOUBLE_EQ(r.ratio, 1.5);
  EXPECT_DOUBLE_EQ(r.lo, 1.5);
  EXPECT_DOUBLE_EQ(r.hi, 1.5);

  // B is A scaled by 1.5: the 95% interval covers 1.5 and is narrow for 400 samples.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(100, 10);
  std::vector<double> a, b;
  for (int i = 0; i < 400; ++i) a.push_back(noise(rng));
  for (int i = 0; i < 400; ++i) b.push_back(1.5 * noise(rng));
  for (Statistic s : {Statistic::kMean, Statistic::kMedian}) {
    r = bootstrap_ratio_ci(a, b, s, 1000, 3);
    EXPECT_LT(r.lo, 1.5);
    EXPECT_GT(r.hi, 1.5);
    EXPECT_LT(r.hi - r.lo, 0.1);
    EXPECT_LE(r.lo, r.ratio);
    EXPECT_GE(r.hi, r.ratio);
    // Deterministic for a seed.
    const RatioCi again = bootstrap_ratio_ci(a, b, s, 1000, 3);
    EXPECT_EQ(again.lo, r.lo);
    EXPECT_EQ(again.hi, r.hi);
  }
  EXPECT_FALSE(bootstrap_ratio_ci({}, b, Statistic::kMean, 100, 1).has_ci);
}

}  // namespace
}  // namespace densa::bench
