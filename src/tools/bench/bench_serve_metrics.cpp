#include "tools/bench/bench_serve_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace densa::bench {

double percentile_sorted(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Distribution summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.n = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(d.n);
  double ss = 0;
  for (double v : values) ss += (v - d.mean) * (v - d.mean);
  d.stddev = d.n > 1 ? std::sqrt(ss / static_cast<double>(d.n - 1)) : 0;
  d.min = values.front();
  d.max = values.back();
  d.median = percentile_sorted(values, 0.5);
  d.p90 = percentile_sorted(values, 0.9);
  d.p99 = percentile_sorted(values, 0.99);
  return d;
}

std::optional<double> tpot_s(const RequestRecord& r) {
  if (!r.ok || r.output_tokens < 2) return std::nullopt;
  return (r.e2e_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1);
}

bool meets_slo(const RequestRecord& r, const Slo& slo) {
  if (!r.ok) return false;
  if (slo.ttft_ms && r.ttft_s * 1e3 > *slo.ttft_ms) return false;
  if (slo.tpot_ms) {
    const std::optional<double> tpot = tpot_s(r);
    if (tpot && *tpot * 1e3 > *slo.tpot_ms) return false;
  }
  return true;
}

LevelMetrics compute_level_metrics(std::span<const RequestRecord> records, double duration_s,
                                   const Slo& slo) {
  LevelMetrics m;
  m.num_requests = static_cast<int>(records.size());
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  std::vector<double> server, network, queue, prefill, decode;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      ++m.num_failed;
      continue;
    }
    ++m.num_ok;
    m.total_input_tokens += r.prompt_tokens;
    m.total_output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s * 1e3);
    e2e.push_back(r.e2e_s * 1e3);
    if (const std::optional<double> t = tpot_s(r)) tpot.push_back(*t * 1e3);
    for (double gap : r.itl_s) itl.push_back(gap * 1e3);
    if (meets_slo(r, slo)) ++m.num_good;
    if (r.server) {
      server.push_back(r.server->server_s * 1e3);
      network.push_back(std::max(0.0, r.e2e_s - r.server->server_s) * 1e3);
      queue.push_back(r.server->queue_s * 1e3);
      prefill.push_back(r.server->prefill_s * 1e3);
      decode.push_back(r.server->decode_s * 1e3);
    }
  }
  m.server_ms = summarize(std::move(server));
  m.network_ms = summarize(std::move(network));
  m.queue_ms = summarize(std::move(queue));
  m.prefill_ms = summarize(std::move(prefill));
  m.decode_ms = summarize(std::move(decode));
  m.ttft_ms = summarize(std::move(ttft));
  m.tpot_ms = summarize(std::move(tpot));
  m.itl_ms = summarize(std::move(itl));
  m.e2e_ms = summarize(std::move(e2e));
  if (duration_s > 0) {
    m.request_throughput = m.num_ok / duration_s;
    m.input_throughput = static_cast<double>(m.total_input_tokens) / duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput = m.input_throughput + m.output_throughput;
    m.goodput = m.num_good / duration_s;
  }
  return m;
}

double student_t975(int df) {
  // Exact table for small df; beyond it the Cornish-Fisher expansion around z = 1.959964
  // is accurate to < 1e-4.
  static constexpr double kTable[] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646,
                                      2.3060,  2.2622, 2.2281, 2.2010, 2.1788, 2.1604, 2.1448,
                                      2.1314,  2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796,
                                      2.0739,  2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484,
                                      2.0452,  2.0423};
  if (df < 1) df = 1;
  if (df <= 30) return kTable[df - 1];
  const double z = 1.959964, n = df;
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * n) + (5 * z5 + 16 * z3 + 3 * z) / (96 * n * n);
}

RatioCi paired_ratio_ci(std::span<const double> a, std::span<const double> b) {
  std::vector<double> logs;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] > 0 && b[i] > 0) logs.push_back(std::log(b[i] / a[i]));
  }
  RatioCi r;
  r.n = static_cast<int>(logs.size());
  if (logs.empty()) return r;
  const double mean = std::accumulate(logs.begin(), logs.end(), 0.0) / r.n;
  r.ratio = r.lo = r.hi = std::exp(mean);
  if (r.n < 2) return r;
  double ss = 0;
  for (double v : logs) ss += (v - mean) * (v - mean);
  const double se = std::sqrt(ss / (r.n - 1)) / std::sqrt(static_cast<double>(r.n));
  const double half = student_t975(r.n - 1) * se;
  r.lo = std::exp(mean - half);
  r.hi = std::exp(mean + half);
  r.has_ci = true;
  return r;
}

namespace {

double statistic(std::vector<double>& v, Statistic stat) {
  switch (stat) {
    case Statistic::kMean:
      return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    case Statistic::kMedian:
      std::sort(v.begin(), v.end());
      return percentile_sorted(v, 0.5);
  }
  return 0;
}

}  // namespace

RatioCi bootstrap_ratio_ci(std::span<const double> a, std::span<const double> b, Statistic stat,
                           int num_resamples, uint64_t seed) {
  RatioCi r;
  if (a.empty() || b.empty()) return r;
  std::vector<double> va(a.begin(), a.end()), vb(b.begin(), b.end());
  const double sa = statistic(va, stat), sb = statistic(vb, stat);
  if (sa <= 0) return r;
  r.ratio = r.lo = r.hi = sb / sa;
  if (num_resamples < 2) return r;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick_a(0, a.size() - 1), pick_b(0, b.size() - 1);
  std::vector<double> ratios;
  ratios.reserve(num_resamples);
  for (int i = 0; i < num_resamples; ++i) {
    for (double& v : va) v = a[pick_a(rng)];
    for (double& v : vb) v = b[pick_b(rng)];
    const double ra = statistic(va, stat);
    if (ra > 0) ratios.push_back(statistic(vb, stat) / ra);
  }
  if (ratios.size() < 2) return r;
  std::sort(ratios.begin(), ratios.end());
  r.lo = percentile_sorted(ratios, 0.025);
  r.hi = percentile_sorted(ratios, 0.975);
  r.n = static_cast<int>(ratios.size());
  r.has_ci = true;
  return r;
}

}  // namespace densa::bench
