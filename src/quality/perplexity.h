#pragma once
// Perplexity the way llama-perplexity and the fixture README define it: the token stream is cut
// into non-overlapping windows of `ctx` tokens (tail dropped), the first token of each window
// is replaced by BOS, each window runs from position 0 with a fresh cache, and NLL is taken
// from a log-softmax in double over the fp32 logits.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kv/kv_scales.h"
#include "model/model_weights.h"

namespace densa {

struct PerplexityOptions {
  int ctx = 256;
  DType kv_dtype = DType::kF32;
  KvScaleMode kv_scale_mode = KvScaleMode::kNone;  // kFP8E4M3: kStatic or kDynamic
  const KvScales* kv_scales = nullptr;             // borrowed; required for kStatic
  int max_windows = 0;  // 0 = all
};

struct PerplexityResult {
  double ppl_all = 0;          // every next-token prediction of each window (ctx - 1 per window)
  double ppl_second_half = 0;  // predictions from positions ctx/2 .. ctx-2 (llama-perplexity)
  int64_t num_scored_all = 0;
  int64_t num_scored_half = 0;
  int num_windows = 0;
};

// Calls on_window(window_idx, logits [ctx, vocab]) after each window when given (for KL).
PerplexityResult compute_perplexity(
    const ModelWeights& w, std::span<const TokenId> ids, const PerplexityOptions& opts,
    ThreadPool* pool,
    const std::function<void(int, std::span<const float>)>& on_window = nullptr);

// log p(target | logits) computed in double precision.
double log_softmax_at(std::span<const float> logits, TokenId target);
// KL(P || Q) for one position from log-probabilities: sum_v exp(lp[v]) (lp[v] - lq[v]) in
// double, clamped at 0 (it is exactly 0 when lp == lq).
double kl_divergence(std::span<const float> lp, std::span<const float> lq);
// Log-softmax of one row of logits, computed in double and rounded to float.
void log_softmax_row(std::span<const float> logits, std::span<float> out);

}  // namespace densa
