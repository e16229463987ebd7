#pragma once
// Quality canary: a serving process periodically scores a fixed probe text with its serving
// precision (its weights and KV dtype) and with a baseline path it holds (the same checkpoint
// loaded again with BF16 matrices and a BF16 KV cache, with the served weights'
// LoadOptions::bf16_f32_activations; where its BF16 matrices run on AMX tiles,
// matmul_bf16_on_amx, the baseline rounds x to bf16: that costs KL 2.5e-5 to
// 4.5e-4 on the fixtures, far under the thresholds), and reports the mean per-token
// KL(P_baseline || P_serving) and the perplexity change. Crossing a threshold marks the
// server's quality as degraded (`densa_quality_degraded`), the signal a rollback needs.
//
// Scheduling choice: the canary runs on its own thread, at the lowest CPU priority (nice 19),
// with single-threaded kernels and its own buffers; it never enters the engine's queue, so
// serving requests are not stalled behind it (they only share the cores).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/ids.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "model/model_weights.h"

namespace densa {

struct CanaryThresholds {
  double max_kl = 0.05;          // mean KL in nats (FP8 KV on the MoE fixture: ~0.007)
  double max_ppl_delta = 0.05;   // serving / baseline perplexity - 1 (FP8 KV: ~0.004)
};

struct CanaryReading {
  int64_t num_tokens = 0;        // scored next-token predictions
  double kl_mean = 0;
  double kl_max = 0;
  double ppl_serving = 0;
  double ppl_baseline = 0;
  double ppl_delta_ratio = 0;
  bool degraded = false;
  double seconds = 0;            // wall time of the scoring
};

// One precision path: weights (borrowed) and the KV dtype it runs with (fp8: dynamic scales).
struct CanaryPath {
  const ModelWeights* weights = nullptr;
  DType kv_dtype = DType::kBF16;
};

// Scores `probe` (BOS first, 2 .. context tokens) on both paths. Single-threaded when pool is null.
Result<CanaryReading> score_canary(const CanaryPath& serving, const CanaryPath& baseline,
                                   std::span<const TokenId> probe, const CanaryThresholds& thresholds,
                                   ThreadPool* pool = nullptr);

// The probe text of `path` tokenized with BOS and cut to the model's context.
Result<std::vector<TokenId>> load_canary_probe(const ModelWeights& w, const std::string& path);

// The baseline copy needs about 2 bytes per parameter; fails (resource_exhausted) when the
// machine's available memory (/proc/meminfo MemAvailable) cannot hold it with 25% to spare.
Status check_canary_baseline_memory(const ModelWeights& serving);

// Tests only: rounds every quantizable matrix (attention, FFN, experts) to a symmetric
// per-row grid of 2^bits - 1 levels, in F32. bits = 2 leaves {-max, 0, +max}: a serving
// precision that is deliberately, visibly bad.
Status degrade_weights_for_test(ModelWeights& w, int bits);

// Runs score_canary every `every` on a low-priority thread (the first run at once) and hands
// each reading (or failure) to `on_reading`. stop() (or the destructor) ends it promptly.
class CanaryThread {
 public:
  using Callback = std::function<void(const Result<CanaryReading>&)>;
  CanaryThread(CanaryPath serving, CanaryPath baseline, std::vector<TokenId> probe, CanaryThresholds thresholds,
               std::chrono::milliseconds every, Callback on_reading);
  ~CanaryThread();
  CanaryThread(const CanaryThread&) = delete;
  CanaryThread& operator=(const CanaryThread&) = delete;
  void stop();

 private:
  void loop();

  const CanaryPath serving_, baseline_;
  const std::vector<TokenId> probe_;
  const CanaryThresholds thresholds_;
  const std::chrono::milliseconds every_;
  const Callback on_reading_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace densa
