#include "tools/generator.h"

#include <numeric>

#include "core/check.h"
#include "kv/contiguous_kv_cache.h"

namespace densa {

std::vector<TokenId> generate(const ModelWeights& w, std::span<const TokenId> prompt,
                              const GenerateOptions& opts, ThreadPool* pool,
                              const std::function<bool(TokenId, std::span<const float>)>& on_token) {
  const ModelConfig& cfg = w.config;
  CHECK(!prompt.empty());
  const int max_tokens = std::min<int>(cfg.max_position_embeddings,
                                       static_cast<int>(prompt.size()) + opts.max_new_tokens);
  ContiguousKvCache cache(cfg.num_layers, cfg.num_kv_heads, cfg.head_dim, max_tokens, 1, opts.kv_dtype);
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
                                 DType kv_dtype, ThreadPool* pool) {
  const ModelConfig& cfg = w.config;
  const int n = static_cast<int>(tokens.size());
  ContiguousKvCache cache(cfg.num_layers, cfg.num_kv_heads, cfg.head_dim, n, 1, kv_dtype);
  ForwardScratch scratch;
  std::vector<int32_t> positions(n), seq(n, 0), rows(n);
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> logits(static_cast<size_t>(n) * cfg.vocab_size);
  forward(w, ForwardBatch{tokens, positions, seq, rows}, cache.view(), scratch, pool, logits.data());
  return logits;
}

}  // namespace densa
