#include "quality/canary.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "model/quantize_weights.h"
#include "quality/generator.h"
#include "quality/perplexity.h"
#include "quant/dequantize.h"

namespace densa {
namespace {

std::vector<float> path_logits(const CanaryPath& p, std::span<const TokenId> probe, ThreadPool* pool) {
  const KvScaleMode mode = p.kv_dtype == DType::kFP8E4M3 ? KvScaleMode::kDynamic : KvScaleMode::kNone;
  return prompt_logits(*p.weights, probe, p.kv_dtype, pool, mode);
}

}  // namespace

Result<CanaryReading> score_canary(const CanaryPath& serving, const CanaryPath& baseline,
                                   std::span<const TokenId> probe, const CanaryThresholds& thresholds,
                                   ThreadPool* pool) {
  if (serving.weights == nullptr || baseline.weights == nullptr) return invalid_argument("canary needs both paths");
  const int vocab = serving.weights->config.vocab_size;
  if (baseline.weights->config.vocab_size != vocab) return invalid_argument("canary paths differ in vocabulary");
  if (probe.size() < 2) return invalid_argument("the canary probe needs at least 2 tokens");
  if (static_cast<int64_t>(probe.size()) > serving.weights->config.max_position_embeddings)
    return invalid_argument("the canary probe is longer than the model's context");
  const auto start = std::chrono::steady_clock::now();
  const std::vector<float> serve = path_logits(serving, probe, pool);
  const std::vector<float> base = path_logits(baseline, probe, pool);
  CanaryReading r;
  std::vector<float> lp(vocab), lq(vocab);
  double nll_serve = 0, nll_base = 0, kl_sum = 0;
  for (size_t p = 0; p + 1 < probe.size(); ++p) {
    const std::span<const float> row_base(base.data() + p * vocab, vocab);
    const std::span<const float> row_serve(serve.data() + p * vocab, vocab);
    log_softmax_row(row_base, lp);
    log_softmax_row(row_serve, lq);
    const double kl = kl_divergence(lp, lq);
    kl_sum += kl;
    r.kl_max = std::max(r.kl_max, kl);
    nll_base -= lp[probe[p + 1]];
    nll_serve -= lq[probe[p + 1]];
    ++r.num_tokens;
  }
  r.kl_mean = kl_sum / static_cast<double>(r.num_tokens);
  r.ppl_serving = std::exp(nll_serve / static_cast<double>(r.num_tokens));
  r.ppl_baseline = std::exp(nll_base / static_cast<double>(r.num_tokens));
  r.ppl_delta_ratio = r.ppl_serving / r.ppl_baseline - 1.0;
  r.degraded = r.kl_mean > thresholds.max_kl || r.ppl_delta_ratio > thresholds.max_ppl_delta;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

Result<std::vector<TokenId>> load_canary_probe(const ModelWeights& w, const std::string& path) {
  if (w.tokenizer == nullptr) return invalid_argument("the model has no tokenizer for the canary probe");
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot read the canary probe " + path);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  std::vector<TokenId> ids = w.tokenizer->encode(text, /*add_bos=*/true);
  if (ids.size() < 2) return invalid_argument("the canary probe " + path + " is empty");
  const size_t context = static_cast<size_t>(w.config.max_position_embeddings);
  if (ids.size() > context) ids.resize(context);
  return ids;
}

Status check_canary_baseline_memory(const ModelWeights& serving) {
  const int64_t need = serving.num_params() * 2;
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key != "MemAvailable:") continue;
    const int64_t available = kib * 1024;
    if (need + need / 4 > available) {
      return resource_exhausted("the BF16 baseline copy needs " + std::to_string(need >> 20) + " MiB, " +
                                std::to_string(available >> 20) + " MiB available");
    }
    return Status::ok();
  }
  return Status::ok();  // no /proc/meminfo: let the load itself fail if it must
}

Status degrade_weights_for_test(ModelWeights& w, int bits) {
  if (bits < 2 || bits > 8) return invalid_argument("degrade bits must be 2..8");
  const float half_levels = static_cast<float>((1 << (bits - 1)) - 1);
  for_each_quantizable_matrix(w, [&](const std::string&, WeightView& v) {
    if (v.empty()) return;
    float* out = reinterpret_cast<float*>(w.alloc_owned(static_cast<size_t>(v.rows * v.cols) * sizeof(float)));
    for (int64_t r = 0; r < v.rows; ++r) {
      float* row = out + r * v.cols;
      dequantize_row(v, r, row);
      float amax = 0;
      for (int64_t c = 0; c < v.cols; ++c) amax = std::max(amax, std::fabs(row[c]));
      const float step = amax > 0 ? amax / half_levels : 1.0f;
      for (int64_t c = 0; c < v.cols; ++c) row[c] = std::round(row[c] / step) * step;
    }
    WeightView f32;
    f32.dtype = DType::kF32;
    f32.rows = v.rows;
    f32.cols = v.cols;
    f32.data = out;
    v = f32;
  });
  return Status::ok();
}

CanaryThread::CanaryThread(CanaryPath serving, CanaryPath baseline, std::vector<TokenId> probe,
                           CanaryThresholds thresholds, std::chrono::milliseconds every, Callback on_reading)
    : serving_(serving),
      baseline_(baseline),
      probe_(std::move(probe)),
      thresholds_(thresholds),
      every_(every),
      on_reading_(std::move(on_reading)),
      thread_([this] { loop(); }) {}

CanaryThread::~CanaryThread() { stop(); }

void CanaryThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CanaryThread::loop() {
  // Lowest priority for this thread only (Linux: nice is per thread), so the engine wins the cores.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    on_reading_(score_canary(serving_, baseline_, probe_, thresholds_, nullptr));
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, every_, [this] { return stop_; })) return;
  }
}

}  // namespace densa
