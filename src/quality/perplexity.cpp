#include "quality/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "quality/generator.h"

namespace densa {

double log_softmax_at(std::span<const float> logits, TokenId target) {
  double mx = logits[0];
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  return static_cast<double>(logits[target]) - mx - std::log(sum);
}

PerplexityResult compute_perplexity(const ModelWeights& w, std::span<const TokenId> ids,
                                    const PerplexityOptions& opts, ThreadPool* pool,
                                    const std::function<void(int, std::span<const float>)>& on_window) {
  const int ctx = opts.ctx;
  CHECK(ctx >= 2);
  const int vocab = w.config.vocab_size;
  int num_windows = static_cast<int>(ids.size() / ctx);
  if (opts.max_windows > 0) num_windows = std::min(num_windows, opts.max_windows);
  double nll_all = 0, nll_half = 0;
  int64_t n_all = 0, n_half = 0;
  std::vector<TokenId> window(ctx);
  for (int wi = 0; wi < num_windows; ++wi) {
    std::copy_n(ids.begin() + static_cast<int64_t>(wi) * ctx, ctx, window.begin());
    window[0] = w.config.bos_token_id;
    const std::vector<float> logits = prompt_logits(w, window, opts.kv_dtype, pool, opts.kv_scale_mode, opts.kv_scales);
    for (int p = 0; p + 1 < ctx; ++p) {
      const double nll = -log_softmax_at(
          std::span<const float>(logits.data() + static_cast<int64_t>(p) * vocab, vocab), window[p + 1]);
      nll_all += nll;
      ++n_all;
      if (p >= ctx / 2) {
        nll_half += nll;
        ++n_half;
      }
    }
    if (on_window) on_window(wi, logits);
  }
  PerplexityResult r;
  r.num_windows = num_windows;
  r.num_scored_all = n_all;
  r.num_scored_half = n_half;
  r.ppl_all = n_all ? std::exp(nll_all / n_all) : 0;
  r.ppl_second_half = n_half ? std::exp(nll_half / n_half) : 0;
  return r;
}

double kl_divergence(std::span<const float> lp, std::span<const float> lq) {
  double kl = 0;
  for (size_t v = 0; v < lp.size(); ++v) {
    const double p = lp[v];
    kl += std::exp(p) * (p - static_cast<double>(lq[v]));
  }
  return std::max(0.0, kl);
}

void log_softmax_row(std::span<const float> logits, std::span<float> out) {
  double mx = logits[0];
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double lse = mx + std::log(sum);
  for (size_t v = 0; v < logits.size(); ++v) out[v] = static_cast<float>(static_cast<double>(logits[v]) - lse);
}

}  // namespace densa
