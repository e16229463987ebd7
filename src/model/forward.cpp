#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "model/arch_deepseek_v3.h"
#include "model/ffn.h"
#include "quant/dequantize.h"

namespace densa {

namespace {

// Largest K / V read of one layer that forward() prefetches a layer ahead: well inside a core's
// L2 (1-2 MiB), so the rows are still cached when attention reads them.
constexpr int64_t kKvPrefetchBytes = 256 * 1024;

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// x[t, :] += bias for each of the n rows.
void add_bias(float* x, const std::vector<float>& bias, int64_t n) {
  const int64_t d = static_cast<int64_t>(bias.size());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < d; ++i) x[t * d + i] += bias[i];
  }
}

}  // namespace

void embed_tokens(const ModelWeights& w, std::span<const TokenId> tokens, float* x, const ForwardScratch& scratch) {
  const ModelConfig& cfg = w.config;
  const int64_t H = cfg.hidden_size, rows = w.tok_embeddings.rows;
  const bool split = rows != cfg.vocab_size;  // a vocabulary-parallel slice
  CHECK(!split || (scratch.parallel != nullptr && scratch.parallel->tp != nullptr))
      << "a vocabulary-parallel embedding slice needs its tp group to sum over";
  const int64_t first = split ? int64_t{w.parallel.tp_rank} * rows : 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const TokenId tok = tokens[t];
    CHECK(tok >= 0 && tok < cfg.vocab_size) << "token id " << tok;
    float* row = x + static_cast<int64_t>(t) * H;
    if (tok >= first && tok < first + rows) {
      dequantize_row(w.tok_embeddings, tok - first, row);
    } else {
      std::fill(row, row + H, 0.0f);
    }
  }
  if (split) scratch.sum_over_tp(x, static_cast<int64_t>(tokens.size()) * H);
}

namespace {

// The attention half of GQA layer l. K and V of every token are projected and stored (later
// steps read them). Q, attention and the output projection run for every token, the residual
// added into x (logit_rows_only false), or for the batch's m logit rows alone (the last layer,
// forward.h), whose hidden states plus the attention output land in s.last_x [m, hidden]. Every
// step is row-wise (attention per query, matmul per row), so a row gets the same bits either
// way. Returns the rows updated: x, or s.last_x.
float* attention_sublayer(const ModelWeights& w, int l, const ForwardBatch& batch, const KvView& kv, ForwardScratch& s,
                          ThreadPool* pool, float* x, bool logit_rows_only) {
  const ModelConfig& cfg = w.config;
  const LayerWeights& lw = w.layers[l];
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t m = logit_rows_only ? static_cast<int64_t>(batch.logit_rows.size()) : n;
  const int H = cfg.hidden_size, hd = cfg.head_dim;
  const int q_dim = cfg.num_heads * hd;
  float* xn = s.xn.data();
  float* k = s.k.data();
  float* v = s.v.data();
  rmsnorm(x, lw.attn_norm.data(), n, H, cfg.rms_norm_eps, xn, pool);
  std::span<const int32_t> seq = batch.seq_idx, pos = batch.positions;
  if (logit_rows_only) {
    s.last_seq_idx.resize(static_cast<size_t>(m));
    s.last_positions.resize(static_cast<size_t>(m));
    for (int64_t j = 0; j < m; ++j) {
      const int32_t r = batch.logit_rows[j];
      CHECK(r >= 0 && r < n) << "logit row " << r << " of " << n;
      s.last_seq_idx[j] = batch.seq_idx[r];
      s.last_positions[j] = batch.positions[r];
    }
    seq = s.last_seq_idx;
    pos = s.last_positions;
  }
  float* q = grow(s.q, m * q_dim);
  const MatmulJob qkv[3] = {{.w = lw.wq,
                             .x = xn,
                             .n = m,
                             .y = q,
                             .x_rows = logit_rows_only ? batch.logit_rows.data() : nullptr,
                             .x_rows_of = logit_rows_only ? n : 0},
                            {lw.wk, xn, n, k},
                            {lw.wv, xn, n, v}};
  matmul_many(m > 0 ? std::span<const MatmulJob>(qkv, 3) : std::span<const MatmulJob>(qkv + 1, 2), pool);
  if (!lw.bq.empty()) {
    add_bias(q, lw.bq, m);
    add_bias(k, lw.bk, n);
    add_bias(v, lw.bv, n);
  }
  if (!lw.q_norm.empty()) {  // per-head RMSNorm: rows of head_dim
    rmsnorm(q, lw.q_norm.data(), m * cfg.num_heads, hd, cfg.rms_norm_eps, q, pool);
    rmsnorm(k, lw.k_norm.data(), n * cfg.num_kv_heads, hd, cfg.rms_norm_eps, k, pool);
  }
  rope_neox_apply(k, s.rope, cfg.num_kv_heads, pool);
  kv_store(kv, l, k, v, batch.seq_idx, batch.positions, pool);
  if (m == 0) return logit_rows_only ? s.last_x.data() : x;
  if (logit_rows_only) rope_table_build(s.last_rope, pos.data(), m, hd, cfg.rope_theta, cfg.rope_dim());
  rope_neox_apply(q, logit_rows_only ? s.last_rope : s.rope, cfg.num_heads, pool);
  float* attn = grow(s.attn, m * q_dim);
  float* proj = grow(s.proj, m * H);
  paged_attention(kv, l, q, cfg.num_heads, 1.0f / std::sqrt(static_cast<float>(hd)), seq, pos, attn, pool);
  matmul(lw.wo, attn, m, proj, pool);
  s.sum_over_tp(proj, m * H);
  float* rows = logit_rows_only ? gather_logit_rows(batch, x, H, s) : x;
  add_into(rows, proj, m * H, pool);
  return rows;
}

}  // namespace

void forward(const ModelWeights& w, const ForwardBatch& batch, const KvView& kv,
             ForwardScratch& s, ThreadPool* pool, float* logits) {
  const ModelConfig& cfg = w.config;
  if (cfg.is_mla()) return forward_deepseek_v3(w, batch, kv, s, pool, logits);  // latent KV cache
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  CHECK(batch.positions.size() == batch.tokens.size() && batch.seq_idx.size() == batch.tokens.size());
  const int H = cfg.hidden_size, hd = cfg.head_dim;
  const int q_dim = cfg.num_heads * hd, kv_dim = cfg.num_kv_heads * hd;
  const int rope_dim = cfg.rope_dim();

  float* x = grow(s.x, n * H);
  float* xn = grow(s.xn, n * H);
  grow(s.q, n * q_dim);
  grow(s.k, n * kv_dim);
  grow(s.v, n * kv_dim);
  grow(s.attn, n * q_dim);
  float* proj = grow(s.proj, n * H);
  const int top_k = std::max(1, cfg.num_experts_per_tok);
  int32_t* selected = grow(s.selected_experts, static_cast<size_t>(cfg.num_layers) * n * top_k);
  s.expert_seconds = 0;

  embed_tokens(w, batch.tokens, x, s);
  rope_table_build(s.rope, batch.positions.data(), n, hd, cfg.rope_theta, rope_dim);

  // The last layer past its K / V only for the logit rows (see forward.h), unless asked for all.
  const bool narrow_last = !s.full_last_layer && static_cast<int64_t>(batch.logit_rows.size()) < n;
  for (int l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    int32_t* layer_selected = selected + static_cast<int64_t>(l) * n * top_k;
    if (narrow_last && l + 1 == cfg.num_layers) {
      float* rows = attention_sublayer(w, l, batch, kv, s, pool, x, true);
      return last_layer_ffn_and_logits(w, batch, rows, xn, proj, s, layer_selected, pool, logits);
    }
    attention_sublayer(w, l, batch, kv, s, pool, x, false);

    // The next layer's K / V rows, asked for now so they arrive while this FFN's weights stream
    // (at short context attention otherwise waits on DRAM for each page in turn).
    if (l + 1 < cfg.num_layers) {
      paged_attention_prefetch(kv, l + 1, batch.seq_idx, batch.positions, kKvPrefetchBytes);
    }
    ffn_sublayer(cfg, lw, l, x, xn, proj, n, s, layer_selected, pool);
  }

  final_logits(w, batch, x, n, s, pool, logits);
}

}  // namespace densa
