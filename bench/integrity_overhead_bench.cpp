// KV integrity overhead on an in-process serving load: rounds of 8 concurrent greedy requests
// of 192 prompt / 64 output tokens on the MoE fixture (its whole 256-token context), run on
// ONE warm engine whose integrity policy is switched between runs (off / on / digest), in a
// different order each round, so the runs of a round are paired and drift hits every mode
// alike. Per mode and round: output throughput (tokens / s over the round's wall time) and
// p99 TPOT (over the round's requests). Reports the mean ratio mode/off with a 95% t-interval
// over rounds, for tags (`on`) and, separately, `digest`. A plain main(), not a timed test.
//
//   ./build-int/integrity_overhead_bench [--model PATH] [--rounds N] [--threads T]
//       [--concurrency C] [--prompt-len P] [--gen-len G] [--kv-cache-mib M]
// (the last four default to the fixture run: 8 x 192 in / 64 out, 64 MiB of KV pool).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model_loader.h"

namespace densa {
namespace {

using Clock = std::chrono::steady_clock;


struct RoundStats {
  double throughput_tps = 0;  // output tokens / s
  double p99_tpot_s = 0;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

RoundStats run_round(Engine& engine, const std::vector<GenerateRequest>& reqs) {
  const Clock::time_point start = Clock::now();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateRequest& r : reqs) streams.push_back(engine.submit(r).value());
  std::vector<double> tpots;
  int64_t num_tokens = 0;
  Clock::time_point end = start;
  for (auto& s : streams) {
    std::vector<Clock::time_point> times;
    while (true) {
      std::optional<TokenEvent> e = s->next(std::chrono::milliseconds(120000));
      CHECK(e.has_value()) << "request timed out";
      CHECK(e->finish != FinishReason::kError) << e->error.to_string();
      if (e->token) times.push_back(e->time);
      if (e->finish != FinishReason::kNone) break;
    }
    num_tokens += static_cast<int64_t>(times.size());
    end = std::max(end, times.back());
    if (times.size() >= 2) {
      tpots.push_back(std::chrono::duration<double>(times.back() - times.front()).count() /
                      static_cast<double>(times.size() - 1));
    }
  }
  RoundStats st;
  st.throughput_tps = static_cast<double>(num_tokens) / std::chrono::duration<double>(end - start).count();
  st.p99_tpot_s = percentile(tpots, 0.99);
  return st;
}

// Two-sided 95% Student t quantile for `df` degrees of freedom.
double t95(int df) {
  static const double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                              2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                              2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return NAN;
  if (df <= 30) return kT[df - 1];
  return 1.96 + 2.4 / df;
}

struct Interval {
  double mean, lo, hi;
};

Interval mean_ci(const std::vector<double>& x) {
  const double n = static_cast<double>(x.size());
  double mean = 0;
  for (double v : x) mean += v;
  mean /= n;
  double var = 0;
  for (double v : x) var += (v - mean) * (v - mean);
  var /= std::max(1.0, n - 1);
  const double half = t95(static_cast<int>(x.size()) - 1) * std::sqrt(var / n);
  return {mean, mean - half, mean + half};
}

int main_impl(int argc, char** argv) {
  std::string model = "/work/shared/models/tinystories-mixtral-3.6m/gguf/tinystories-mixtral-3.6m-f16.gguf";
  if (const char* d = std::getenv("DENSA_SHARED_DIR")) {
    model = std::string(d) + "/models/tinystories-mixtral-3.6m/gguf/tinystories-mixtral-3.6m-f16.gguf";
  }
  int rounds = 20;
  int threads = 0;
  int64_t kv_cache_mib = 64;
  int concurrency = 8, prompt_len = 192, gen_len = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--concurrency")) concurrency = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--prompt-len")) prompt_len = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--gen-len")) gen_len = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--kv-cache-mib")) kv_cache_mib = std::atoll(argv[i + 1]);
  }
  Result<ModelWeights> w = load_model(model);
  if (!w.is_ok()) {
    std::fprintf(stderr, "integrity_overhead_bench: %s\n", w.status().to_string().c_str());
    return 1;
  }
  EngineConfig c;
  c.kv_dtype = DType::kBF16;
  c.enable_prefix_cache = false;  // every run of a round does the same work
  c.num_threads = threads;
  c.kv_cache_bytes = kv_cache_mib << 20;
  c.kv_integrity = KvIntegrityPolicy{};
  std::unique_ptr<Engine> engine = Engine::create(*w, c).value();

  std::mt19937 rng(1);
  const int32_t vocab = w->config.vocab_size;
  std::vector<GenerateRequest> reqs(concurrency);
  for (GenerateRequest& r : reqs) {
    r.prompt.push_back(1);
    for (int t = 1; t < prompt_len; ++t) r.prompt.push_back(3 + static_cast<TokenId>(rng() % (vocab - 3)));
    r.max_new_tokens = gen_len;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
  }

  const KvIntegrityPolicy modes[] = {{KvIntegrityMode::kOff, 1, 1},
                                     {KvIntegrityMode::kTags, 1, 1},
                                     {KvIntegrityMode::kDigest, 1, 1}};
  const char* names[] = {"off", "on", "digest"};
  for (int warm = 0; warm < 2; ++warm) (void)run_round(*engine, reqs);

  std::vector<double> tput[3], tpot[3];
  std::vector<int> order = {0, 1, 2};
  for (int round = 0; round < rounds; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int m : order) {
      CHECK(engine->set_kv_integrity(modes[m]).is_ok());
      const RoundStats s = run_round(*engine, reqs);
      tput[m].push_back(s.throughput_tps);
      tpot[m].push_back(s.p99_tpot_s);
    }
  }
  std::printf("KV integrity overhead: %d rounds x %d concurrent x %d in / %d out, %s, BF16 KV\n", rounds,
              concurrency, prompt_len, gen_len, model.c_str());
  std::printf("%-8s %14s %14s\n", "mode", "tok/s (mean)", "p99 TPOT ms");
  for (int m = 0; m < 3; ++m) {
    std::printf("%-8s %14.1f %14.3f\n", names[m], mean_ci(tput[m]).mean, 1e3 * mean_ci(tpot[m]).mean);
  }
  for (int m = 1; m < 3; ++m) {
    std::vector<double> rt, rp;
    for (int r = 0; r < rounds; ++r) {
      rt.push_back(tput[m][r] / tput[0][r]);
      rp.push_back(tpot[m][r] / tpot[0][r]);
    }
    const Interval a = mean_ci(rt), b = mean_ci(rp);
    std::printf("%-7s/off throughput ratio %.4f [%.4f, %.4f]   p99 TPOT ratio %.4f [%.4f, %.4f]\n", names[m], a.mean,
                a.lo, a.hi, b.mean, b.lo, b.hi);
  }
  const EngineStats st = engine->stats();
  std::printf("violations %lld, steps %lld\n", static_cast<long long>(st.kv_integrity_violations),
              static_cast<long long>(st.steps));
  return 0;
}

}  // namespace
}  // namespace densa

int main(int argc, char** argv) { return densa::main_impl(argc, argv); }
