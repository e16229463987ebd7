#include "quality/generator.h"

#include <numeric>

#include "core/check.h"
#include "exec/runner.h"
#include "kv/contiguous_kv_cache.h"

namespace densa {

namespace {

ContiguousKvCache make_cache(const ModelConfig& cfg, int max_tokens, DType dtype, KvScaleMode mode,
                             const KvScales* scales) {
  // Latent (MLA) or per-head layout; fp8 with dynamic scales unless static ones are given.
  const KvLayout layout = kv_layout_for(cfg, max_tokens, dtype, mode == KvScaleMode::kStatic);
  std::span<const float> static_scales;
  if (mode == KvScaleMode::kStatic) {
    CHECK(scales != nullptr) << "fp8 KV with static scales needs KvScales";
    const Status st = validate_kv_scales(*scales, cfg.num_layers, kv_scale_heads(layout));
    CHECK(st.is_ok()) << st.message();
    static_scales = scales->values;
  }
  return ContiguousKvCache(layout, 1, static_scales);
}

}  // namespace

std::vector<TokenId> generate(const ModelWeights& w, std::span<const TokenId> prompt,
                              const GenerateOptions& opts, ThreadPool* pool,
                              const std::function<bool(TokenId, std::span<const float>)>& on_token) {
  const ModelConfig& cfg = w.config;
  CHECK(!prompt.empty());
  const int max_tokens = std::min<int>(cfg.max_position_embeddings,
                                       static_cast<int>(prompt.size()) + opts.max_new_tokens);
  const ContiguousKvCache cache =
      make_cache(cfg, max_tokens, opts.kv_dtype, opts.kv_scale_mode, opts.kv_scales);
  const KvView kv = cache.view();
  ForwardScratch scratch;
  Sampler sampler(opts.sampling);
  std::vector<float> logits(static_cast<size_t>(cfg.vocab_size));
  std::vector<TokenId> out;

  std::vector<TokenId> tokens(prompt.begin(), prompt.end());
  std::vector<int32_t> positions(tokens.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<int32_t> seq(tokens.size(), 0);
  int32_t last_row = static_cast<int32_t>(tokens.size()) - 1;
  ForwardBatch batch{tokens, positions, seq, std::span<const int32_t>(&last_row, 1)};
  int32_t pos = static_cast<int32_t>(tokens.size());
  while (true) {
    forward(w, batch, kv, scratch, pool, logits.data());
    const TokenId next = sampler.sample(logits);
    out.push_back(next);
    if (!on_token(next, logits)) break;
    if (opts.stop_at_eos && next == cfg.eos_token_id) break;
    if (static_cast<int>(out.size()) >= opts.max_new_tokens || pos >= max_tokens) break;
    tokens.assign(1, next);
    positions.assign(1, pos++);
    seq.assign(1, 0);
    last_row = 0;
    batch = ForwardBatch{tokens, positions, seq, std::span<const int32_t>(&last_row, 1)};
  }
  return out;
}

std::vector<float> prompt_logits(const ModelWeights& w, std::span<const TokenId> tokens,
                                 DType kv_dtype, ThreadPool* pool, KvScaleMode kv_scale_mode,
                                 const KvScales* kv_scales) {
  const ModelConfig& cfg = w.config;
  const int n = static_cast<int>(tokens.size());
  const ContiguousKvCache cache = make_cache(cfg, n, kv_dtype, kv_scale_mode, kv_scales);
  ForwardScratch scratch;
  std::vector<int32_t> positions(n), seq(n, 0), rows(n);
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> logits(static_cast<size_t>(n) * cfg.vocab_size);
  forward(w, ForwardBatch{tokens, positions, seq, rows}, cache.view(), scratch, pool, logits.data());
  return logits;
}

}  // namespace densa
