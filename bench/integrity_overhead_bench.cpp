// KV integrity overhead on an in-process serving load: C concurrent greedy requests of P prompt
// / G output tokens (default 8 x 192 / 64, the MoE fixture's whole 256-token context) on ONE
// warm engine (prefix cache off, so every run does the same work). A plain main(), not a timed
// test. Three measures, each a ratio with a 95% confidence interval; tags (`on`) and `digest`
// reported separately:
//
// 1. Rounds: each round runs off / on / digest in a fresh random order, the policy switched
//    between runs. Per run: output throughput and p99 TPOT; the mean per-round ratio mode/off
//    with a Student-t interval over rounds (what issue #6 names; wide on a noisy machine).
// 2. Step interleaving: runs in which a StepObserver switches the policy per engine step:
//    steps (2j, 2j+1) form a pair, one with the check on and one off, the order drawn at
//    random per pair. Over pairs of decode-only steps with the same batch size:
//    mean(on-step time) / mean(off-step time), interval by the delta method over pairs, and
//    the median of the per-pair ratios with a distribution-free interval (a stall of another
//    process lands in one step of a pair and swamps the mean). Noise slower than one step
//    cancels within a pair.
// 3. In situ: the runner times the check itself (StepRecord::integrity_check_us);
//    sum(check time) / sum(step time) over the steps of checked runs, delta-method interval.
//    The check's direct share of the time; not its indirect cost (caches), which 2 includes.
//
//   ./build-integ/integrity_overhead_bench [--model PATH] [--rounds N] [--interleave-runs N]
//       [--threads T] [--concurrency C] [--prompt-len P] [--gen-len G] [--kv-cache-mib M] [--seed S]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model_loader.h"

namespace densa {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kNumModes = 3;  // off, on (tags), digest
const KvIntegrityPolicy kModes[kNumModes] = {{KvIntegrityMode::kOff, 1, 1},
                                             {KvIntegrityMode::kTags, 1, 1},
                                             {KvIntegrityMode::kDigest, 1, 1}};
const char* const kModeNames[kNumModes] = {"off", "on", "digest"};

// One engine step as the bench keeps it.
struct StepSample {
  int64_t step = 0;
  int run = 0;        // which run (request batch) it belongs to
  int mode = 0;       // round runs: the run's mode; interleaved runs: the mode of its "on" steps
  bool on = false;    // the policy in force was `mode` (interleaved runs: else off)
  bool interleaved = false;
  int32_t num_seqs = 0;
  int32_t num_decode_seqs = 0;
  double step_us = 0;
  std::optional<double> check_us;
};

// Records every step; in an interleaved run it also sets the policy of the next step (engine
// thread, between steps). The main thread reconfigures it only while the engine is idle and
// every on_step of the last run has returned (after Engine::audit(), a full engine turn).
class StepLog final : public StepObserver {
 public:
  explicit StepLog(uint32_t seed) : rng_(seed) {}
  void set_engine(Engine* engine) { engine_ = engine; }

  // A run with `mode` fixed for all its steps.
  void begin_fixed(int run, int mode) {
    std::lock_guard<std::mutex> lock(mu_);
    run_ = run;
    mode_ = mode;
    interleaved_ = false;
    on_ = true;
    CHECK(engine_->set_kv_integrity(kModes[mode]).is_ok());
  }
  // A run whose steps alternate between `mode` and off, starting at step `next_step`.
  void begin_interleaved(int run, int mode, int64_t next_step) {
    std::lock_guard<std::mutex> lock(mu_);
    run_ = run;
    mode_ = mode;
    interleaved_ = true;
    set_for(next_step, /*force=*/true);
  }
  void on_step(const StepRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    samples_.push_back({r.step, run_, mode_, on_, interleaved_, r.num_seqs, r.num_decode_seqs, r.step_us(),
                        r.integrity_check_us});
    if (interleaved_) set_for(r.step + 1, /*force=*/false);
  }
  std::vector<StepSample> samples() const {
    std::lock_guard<std::mutex> lock(mu_);
    return samples_;
  }

 private:
  // Step 2j draws which of (2j, 2j+1) is on; 2j+1 takes the other.
  void set_for(int64_t step, bool force) {
    if (step % 2 == 0) pair_first_on_ = (rng_() & 1) != 0;
    const bool on = step % 2 == 0 ? pair_first_on_ : !pair_first_on_;
    if (force || on != on_) CHECK(engine_->set_kv_integrity(on ? kModes[mode_] : kModes[0]).is_ok());
    on_ = on;
  }

  mutable std::mutex mu_;
  Engine* engine_ = nullptr;
  std::mt19937 rng_;
  std::vector<StepSample> samples_;
  int run_ = 0;
  int mode_ = 0;
  bool interleaved_ = false;
  bool on_ = false;  // the policy in force for the next step is kModes[mode_] (else off)
  bool pair_first_on_ = false;
};

struct RunStats {
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

RunStats run_requests(Engine& engine, const std::vector<GenerateRequest>& reqs) {
  const Clock::time_point start = Clock::now();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateRequest& r : reqs) streams.push_back(engine.submit(r).value());
  std::vector<double> tpots;
  int64_t num_tokens = 0;
  Clock::time_point end = start;
  for (auto& s : streams) {
    std::vector<Clock::time_point> times;
    while (true) {
      std::optional<TokenEvent> e = s->next(std::chrono::milliseconds(600000));
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
  // A full engine turn after the last step: its on_step has returned before the next run.
  CHECK(engine.audit().is_ok());
  RunStats st;
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
  double mean = NAN, lo = NAN, hi = NAN;
  size_t n = 0;
};

Interval mean_ci(const std::vector<double>& x) {
  if (x.empty()) return {};
  const double n = static_cast<double>(x.size());
  double mean = 0;
  for (double v : x) mean += v;
  mean /= n;
  double var = 0;
  for (double v : x) var += (v - mean) * (v - mean);
  var /= std::max(1.0, n - 1);
  const double half = t95(static_cast<int>(x.size()) - 1) * std::sqrt(var / n);
  return {mean, mean - half, mean + half, x.size()};
}

// sum(a) / sum(b) over paired samples, with a 95% interval by the delta method:
// se = sd(a_i - R b_i) / (sqrt(n) mean(b)).
Interval ratio_ci(const std::vector<double>& a, const std::vector<double>& b) {
  CHECK(a.size() == b.size()) << "paired samples";
  if (a.size() < 2) return {};
  const double n = static_cast<double>(a.size());
  double sa = 0, sb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sa += a[i];
    sb += b[i];
  }
  const double r = sa / sb;
  double zz = 0;
  for (size_t i = 0; i < a.size(); ++i) zz += (a[i] - r * b[i]) * (a[i] - r * b[i]);
  const double sd = std::sqrt(zz / (n - 1));
  const double half = t95(static_cast<int>(a.size()) - 1) * sd / (std::sqrt(n) * (sb / n));
  return {r, r - half, r + half, a.size()};
}

// The median with a distribution-free 95% interval (order statistics of the sign test):
// robust to the rare long stalls a shared machine adds to single steps.
Interval median_ci(std::vector<double> x) {
  if (x.size() < 2) return {};
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  const double half = 0.98 * std::sqrt(n);  // 1.96 sqrt(n) / 2
  const size_t lo = static_cast<size_t>(std::max(0.0, std::floor(n / 2 - half) - 1));
  const size_t hi = static_cast<size_t>(std::min(n - 1, std::ceil(n / 2 + half)));
  return {percentile(x, 0.5), x[lo], x[hi], x.size()};
}

double load1() {
  double l[1] = {NAN};
  return getloadavg(l, 1) == 1 ? l[0] : NAN;
}

int main_impl(int argc, char** argv) {
  std::string model = "/work/shared/models/tinystories-mixtral-3.6m/gguf/tinystories-mixtral-3.6m-f16.gguf";
  if (const char* d = std::getenv("DENSA_SHARED_DIR")) {
    model = std::string(d) + "/models/tinystories-mixtral-3.6m/gguf/tinystories-mixtral-3.6m-f16.gguf";
  }
  int rounds = 20, interleave_runs = 40;
  int threads = 0;
  int64_t kv_cache_mib = 64;
  int concurrency = 8, prompt_len = 192, gen_len = 64;
  uint32_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--interleave-runs")) interleave_runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--concurrency")) concurrency = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--prompt-len")) prompt_len = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--gen-len")) gen_len = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--kv-cache-mib")) kv_cache_mib = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed")) seed = static_cast<uint32_t>(std::atoll(argv[i + 1]));
    else {
      std::fprintf(stderr, "integrity_overhead_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  Result<ModelWeights> w = load_model(model);
  if (!w.is_ok()) {
    std::fprintf(stderr, "integrity_overhead_bench: %s\n", w.status().to_string().c_str());
    return 1;
  }
  StepLog log(seed + 1);
  EngineConfig c;
  c.kv_dtype = DType::kBF16;
  c.enable_prefix_cache = false;  // every run does the same work
  c.num_threads = threads;
  c.kv_cache_bytes = kv_cache_mib << 20;
  c.kv_integrity = KvIntegrityPolicy{};
  c.step_observer = &log;
  std::unique_ptr<Engine> engine = Engine::create(*w, c).value();
  log.set_engine(engine.get());

  std::mt19937 rng(seed);
  const int32_t vocab = w->config.vocab_size;
  std::vector<GenerateRequest> reqs(concurrency);
  for (GenerateRequest& r : reqs) {
    r.prompt.push_back(1);
    for (int t = 1; t < prompt_len; ++t) r.prompt.push_back(3 + static_cast<TokenId>(rng() % (vocab - 3)));
    r.max_new_tokens = gen_len;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
  }
  const double load_begin = load1();
  const Clock::time_point bench_begin = Clock::now();
  int run = 0;
  for (int warm = 0; warm < 2; ++warm) {
    log.begin_fixed(run++, 0);
    (void)run_requests(*engine, reqs);
  }

  // 1 and 3: rounds of off / on / digest in random order.
  std::vector<double> tput[kNumModes], tpot[kNumModes];
  std::vector<int> order = {0, 1, 2};
  for (int round = 0; round < rounds; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int m : order) {
      log.begin_fixed(run++, m);
      const RunStats s = run_requests(*engine, reqs);
      tput[m].push_back(s.throughput_tps);
      tpot[m].push_back(s.p99_tpot_s);
    }
  }
  // 2 and 3: interleaved runs, tags and digest alternating in random order.
  std::vector<int> imodes = {1, 2};
  for (int i = 0; i < interleave_runs; ++i) {
    std::shuffle(imodes.begin(), imodes.end(), rng);
    for (int m : imodes) {
      log.begin_interleaved(run++, m, engine->stats().steps);
      (void)run_requests(*engine, reqs);
    }
  }
  const double bench_s = std::chrono::duration<double>(Clock::now() - bench_begin).count();
  const double load_end = load1();
  const std::vector<StepSample> samples = log.samples();
  const EngineStats st = engine->stats();

  std::printf("KV integrity overhead: %d x %d in / %d out, %s, BF16 KV, %d kernel threads (0 = all cores)\n",
              concurrency, prompt_len, gen_len, model.c_str(), threads);
  std::printf("%d rounds (off/on/digest) + %d interleaved runs per mode; %.0f s; load average %.2f -> %.2f; "
              "%lld steps, %lld violations\n\n",
              rounds, interleave_runs, bench_s, load_begin, load_end, static_cast<long long>(st.steps),
              static_cast<long long>(st.kv_integrity_violations));

  // 1. Round-level ratios.
  std::printf("Rounds (mean of per-round ratios, Student-t 95%% CI over %d rounds):\n\n", rounds);
  std::printf("| mode | tok/s (mean) | p99 TPOT ms (mean) | throughput ratio vs off [95%% CI] | p99 TPOT ratio vs off "
              "[95%% CI] |\n|---|---|---|---|---|\n");
  for (int m = 0; m < kNumModes; ++m) {
    if (m == 0) {
      std::printf("| off | %.1f | %.3f | | |\n", mean_ci(tput[0]).mean, 1e3 * mean_ci(tpot[0]).mean);
      continue;
    }
    std::vector<double> rt, rp;
    for (int r = 0; r < rounds; ++r) {
      rt.push_back(tput[m][r] / tput[0][r]);
      rp.push_back(tpot[m][r] / tpot[0][r]);
    }
    const Interval a = mean_ci(rt), b = mean_ci(rp);
    std::printf("| %s | %.1f | %.3f | %.4f [%.4f, %.4f] | %.4f [%.4f, %.4f] |\n", kModeNames[m], mean_ci(tput[m]).mean,
                1e3 * mean_ci(tpot[m]).mean, a.mean, a.lo, a.hi, b.mean, b.lo, b.hi);
  }

  // 2. Step pairs: (2j, 2j+1) of one interleaved run, both decode-only, same batch size, one on.
  std::printf("\nStep interleaving (pairs of adjacent decode-only steps, same batch size, one checked):\n\n");
  std::printf("| mode | pairs | mean(on step) / mean(off step) [95%% CI] | median of on/off pair ratios [95%% CI] | "
              "on / off step us (mean) |\n|---|---|---|---|---|\n");
  int64_t num_mislabeled = 0;  // decode steps whose check presence disagrees with the policy set
  for (const StepSample& s : samples) {
    if (s.num_seqs > 0 && s.num_decode_seqs == s.num_seqs && s.mode != 0 && s.on != s.check_us.has_value()) {
      ++num_mislabeled;
    }
  }
  for (int m = 1; m < kNumModes; ++m) {
    std::vector<double> on_us, off_us, pair_ratio;
    for (size_t i = 0; i + 1 < samples.size(); ++i) {
      const StepSample& a = samples[i];
      const StepSample& b = samples[i + 1];
      if (!a.interleaved || a.mode != m || a.step % 2 != 0 || b.step != a.step + 1 || b.run != a.run) continue;
      if (a.num_decode_seqs != a.num_seqs || b.num_decode_seqs != b.num_seqs || a.num_seqs != b.num_seqs) continue;
      if (a.on == b.on) continue;
      const StepSample& on = a.on ? a : b;
      const StepSample& off = a.on ? b : a;
      on_us.push_back(on.step_us);
      off_us.push_back(off.step_us);
      pair_ratio.push_back(on.step_us / off.step_us);
    }
    const Interval a = ratio_ci(on_us, off_us), b = median_ci(pair_ratio);
    double mon = 0, moff = 0;
    for (size_t i = 0; i < on_us.size(); ++i) {
      mon += on_us[i];
      moff += off_us[i];
    }
    const double n = std::max<double>(1, static_cast<double>(on_us.size()));
    std::printf("| %s | %zu | %.4f [%.4f, %.4f] | %.4f [%.4f, %.4f] | %.1f / %.1f |\n", kModeNames[m], a.n, a.mean,
                a.lo, a.hi, b.mean, b.lo, b.hi, mon / n, moff / n);
  }

  // 3. In situ: the check's own time over the step time of checked runs.
  std::printf("\nIn situ (sum of check time / sum of step time, delta-method 95%% CI over steps):\n\n");
  std::printf("| mode | steps | check share | 95%% CI | steps counted |\n|---|---|---|---|---|\n");
  for (int m = 1; m < kNumModes; ++m) {
    std::vector<double> chk_all, step_all, chk_dec, step_dec;
    for (const StepSample& s : samples) {
      if (s.mode != m || !s.on) continue;
      if (!s.interleaved) {  // every step of the mode's rounds, checked or not
        chk_all.push_back(s.check_us.value_or(0.0));
        step_all.push_back(s.step_us);
      } else if (s.num_decode_seqs == s.num_seqs && s.num_seqs > 0) {
        chk_dec.push_back(s.check_us.value_or(0.0));
        step_dec.push_back(s.step_us);
      }
    }
    const Interval a = ratio_ci(chk_all, step_all), d = ratio_ci(chk_dec, step_dec);
    std::printf("| %s, rounds | %zu | %.4f%% | [%.4f%%, %.4f%%] | all steps of its rounds (prefill included) |\n",
                kModeNames[m], a.n, 100 * a.mean, 100 * a.lo, 100 * a.hi);
    std::printf("| %s, interleaved | %zu | %.4f%% | [%.4f%%, %.4f%%] | its checked decode-only steps |\n",
                kModeNames[m], d.n, 100 * d.mean, 100 * d.lo, 100 * d.hi);
  }
  std::printf("\ndecode steps whose check disagrees with the policy set for them: %lld\n",
              static_cast<long long>(num_mislabeled));
  return num_mislabeled == 0 ? 0 : 1;
}

}  // namespace
}  // namespace densa

int main(int argc, char** argv) { return densa::main_impl(argc, argv); }
