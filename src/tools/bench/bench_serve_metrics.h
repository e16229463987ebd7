#pragma once
// The arithmetic of `densa bench serve`: per-request timings in, latency distributions,
// throughput, goodput and A/B ratio confidence intervals out. No I/O, no clocks: the load
// generator (bench_serve_load.h) fills RequestRecords and everything here is a pure function,
// so the unit tests feed synthetic streams with known answers.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace densa::bench {

// The server's own account of one request, seconds: a densa server asked with
// "densa_timing": true puts it in the final chunk (choices[0].densa_timing, server/choice_timing.h).
struct ServerStages {
  double server_s = 0;   // handler entry -> response built
  double queue_s = 0, prefill_s = 0, decode_s = 0;
};

// What one streamed request did. Times are seconds from the start of its level's run.
struct RequestRecord {
  bool ok = false;
  std::string error;            // first line of the failure when !ok
  int64_t prompt_tokens = 0;    // usage.prompt_tokens, else the local count, else 0
  int64_t output_tokens = 0;    // usage.completion_tokens, else the number of token chunks
  double start_s = 0;           // request sent
  double ttft_s = 0;            // first token chunk received, relative to start_s
  double e2e_s = 0;             // last byte received, relative to start_s
  std::vector<double> itl_s;    // [token chunks - 1] gaps between consecutive token chunks
  std::optional<ServerStages> server;  // when the server reported its stage times
};

// Service-level objectives for goodput; an absent bound always passes.
struct Slo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
};

// Summary of one latency sample (milliseconds). Percentiles interpolate linearly between
// order statistics (rank q*(n-1), numpy's default). Empty input gives n = 0 and zeros.
struct Distribution {
  int64_t n = 0;
  double mean = 0, stddev = 0, min = 0, median = 0, p90 = 0, p99 = 0, max = 0;
};

// One level (a concurrency or a request rate) of one repeat.
struct LevelMetrics {
  double level = 0;             // concurrency, or request rate in req/s
  int repeat_idx = 0;
  int num_requests = 0, num_ok = 0, num_failed = 0;
  double duration_s = 0;        // first send to last byte of the level
  int64_t total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput = 0;        // ok requests / s
  double input_throughput = 0;          // prompt tokens / s
  double output_throughput = 0;         // generated tokens / s
  double total_token_throughput = 0;    // both / s
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
  // Round trip split (ok requests the server reported stages for; n = 0 otherwise):
  // network = client e2e - server time, per request.
  Distribution server_ms, network_ms, queue_ms, prefill_ms, decode_ms;
  int num_good = 0;                     // ok requests meeting every SLO
  double goodput = 0;                   // num_good / duration_s
};

// Sorted copy needed: `sorted` must be ascending. q in [0, 1].
double percentile_sorted(std::span<const double> sorted, double q);
Distribution summarize(std::vector<double> values);

// Time per output token after the first: (e2e - ttft) / (output_tokens - 1). nullopt for a
// failed request or one with fewer than two output tokens (TPOT is undefined there).
std::optional<double> tpot_s(const RequestRecord& r);

// A request meets the SLO when it succeeded, its TTFT is within slo.ttft_ms and its TPOT (when
// defined) within slo.tpot_ms.
bool meets_slo(const RequestRecord& r, const Slo& slo);

LevelMetrics compute_level_metrics(std::span<const RequestRecord> records, double duration_s,
                                   const Slo& slo);

// ---- A/B comparison ----

// A ratio B/A with a 95% confidence interval; has_ci is false when the data cannot give one.
struct RatioCi {
  double ratio = 0, lo = 0, hi = 0;
  int n = 0;              // paired observations (or resamples for the bootstrap)
  bool has_ci = false;
};

// Two-sided 97.5% quantile of Student's t with `df` degrees of freedom (df >= 1).
double student_t975(int df);

// Geometric mean of the paired ratios b[i]/a[i] with a t-based 95% CI on the mean log-ratio:
// exp(mean ± t975(n-1) * sd/sqrt(n)). Pairs with a non-positive value are skipped; needs
// n >= 2 for a CI.
RatioCi paired_ratio_ci(std::span<const double> a, std::span<const double> b);

enum class Statistic { kMean, kMedian };

// stat(b)/stat(a) with a percentile-bootstrap 95% CI: both samples are resampled with
// replacement `num_resamples` times (deterministic for a seed), the 2.5% and 97.5% quantiles
// of the resampled ratios are the bounds. Needs both samples non-empty.
RatioCi bootstrap_ratio_ci(std::span<const double> a, std::span<const double> b, Statistic stat,
                           int num_resamples, uint64_t seed);

}  // namespace densa::bench
