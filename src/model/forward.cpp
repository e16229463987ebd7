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

// The attention half of the last decoder layer when only the batch's logit rows (m of its n
// tokens) go on: K and V of every token are projected and stored (later steps read them), while
// Q, attention and the output projection run on the m rows alone, whose hidden states plus the
// attention output land in s.last_x [m, hidden] (last_layer_ffn_and_logits goes on from there).
// Every step is row-wise (attention per query, matmul per row), so the m rows get the bits the
// whole layer would give them.
void last_layer_attention_rows(const ModelWeights& w, const ForwardBatch& batch, const KvView& kv, ForwardScratch& s,
                               ThreadPool* pool, const float* x) {
  const ModelConfig& cfg = w.config;
  const LayerWeights& lw = w.layers[cfg.num_layers - 1];
  const int64_t n = static_cast<int64_t>(batch.tokens.size()), m = static_cast<int64_t>(batch.logit_rows.size());
  const int H = cfg.hidden_size, hd = cfg.head_dim;
  const int q_dim = cfg.num_heads * hd;
  float* xn = s.xn.data();
  float* k = s.k.data();
  float* v = s.v.data();
  rmsnorm(x, lw.attn_norm.data(), n, H, cfg.rms_norm_eps, xn, pool);
  std::vector<int32_t>& seq = s.last_seq_idx;
  std::vector<int32_t>& pos = s.last_positions;
  seq.resize(static_cast<size_t>(m));
  pos.resize(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    const int32_t r = batch.logit_rows[j];
    CHECK(r >= 0 && r < n) << "logit row " << r << " of " << n;
    seq[j] = batch.seq_idx[r];
    pos[j] = batch.positions[r];
  }
  float* q = grow(s.q, m * q_dim);
  const MatmulJob qkv[3] = {
      {.w = lw.wq, .x = xn, .n = m, .y = q, .x_rows = batch.logit_rows.data(), .x_rows_of = n},
      {lw.wk, xn, n, k},
      {lw.wv, xn, n, v}};
  matmul_many(m > 0 ? std::span<const MatmulJob>(qkv, 3) : std::span<const MatmulJob>(qkv + 1, 2), pool);
  if (!lw.bq.empty()) {
    add_bias(q, lw.bq, m);
    add_bias(k, lw.bk, n);
    add_bias(v, lw.bv, n);
  }
  if (!lw.q_norm.empty()) {
    rmsnorm(q, lw.q_norm.data(), m * cfg.num_heads, hd, cfg.rms_norm_eps, q, pool);
    rmsnorm(k, lw.k_norm.data(), n * cfg.num_kv_heads, hd, cfg.rms_norm_eps, k, pool);
  }
  rope_neox_apply(k, s.rope, cfg.num_kv_heads, pool);
  kv_store(kv, cfg.num_layers - 1, k, v, batch.seq_idx, batch.positions, pool);
  if (m == 0) return;
  rope_table_build(s.last_rope, pos.data(), m, hd, cfg.rope_theta, cfg.rope_dim());
  rope_neox_apply(q, s.last_rope, cfg.num_heads, pool);
  float* attn = grow(s.attn, m * q_dim);
  float* proj = grow(s.proj, m * H);
  paged_attention(kv, cfg.num_layers - 1, q, cfg.num_heads, 1.0f / std::sqrt(static_cast<float>(hd)), seq, pos, attn,
                  pool);
  matmul(lw.wo, attn, m, proj, pool);
  s.sum_over_tp(proj, m * H);
  add_into(gather_logit_rows(batch, x, H, s), proj, m * H, pool);
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
  float* q = grow(s.q, n * q_dim);
  float* k = grow(s.k, n * kv_dim);
  float* v = grow(s.v, n * kv_dim);
  float* attn = grow(s.attn, n * q_dim);
  float* proj = grow(s.proj, n * H);
  const int top_k = std::max(1, cfg.num_experts_per_tok);
  int32_t* selected = grow(s.selected_experts, static_cast<size_t>(cfg.num_layers) * n * top_k);
  s.expert_seconds = 0;

  embed_tokens(w, batch.tokens, x, s);
  const float attn_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  rope_table_build(s.rope, batch.positions.data(), n, hd, cfg.rope_theta, rope_dim);

  // The last layer past its K / V only for the logit rows (see forward.h), unless asked for all.
  const int64_t m = static_cast<int64_t>(batch.logit_rows.size());
  const bool narrow_last = !s.full_last_layer && m < n;
  for (int l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    if (narrow_last && l + 1 == cfg.num_layers) {
      last_layer_attention_rows(w, batch, kv, s, pool, x);
      last_layer_ffn_and_logits(w, batch, s.last_x.data(), xn, proj, s,
                                selected + static_cast<int64_t>(l) * n * top_k, pool, logits);
      return;
    }
    rmsnorm(x, lw.attn_norm.data(), n, H, cfg.rms_norm_eps, xn, pool);
    const MatmulJob qkv[3] = {{lw.wq, xn, n, q}, {lw.wk, xn, n, k}, {lw.wv, xn, n, v}};
    matmul_many(qkv, pool);
    if (!lw.bq.empty()) {
      add_bias(q, lw.bq, n);
      add_bias(k, lw.bk, n);
      add_bias(v, lw.bv, n);
    }
    if (!lw.q_norm.empty()) {  // per-head RMSNorm: rows of head_dim
      rmsnorm(q, lw.q_norm.data(), n * cfg.num_heads, hd, cfg.rms_norm_eps, q, pool);
      rmsnorm(k, lw.k_norm.data(), n * cfg.num_kv_heads, hd, cfg.rms_norm_eps, k, pool);
    }
    rope_neox_apply(q, s.rope, cfg.num_heads, pool);
    rope_neox_apply(k, s.rope, cfg.num_kv_heads, pool);
    kv_store(kv, l, k, v, batch.seq_idx, batch.positions, pool);
    paged_attention(kv, l, q, cfg.num_heads, attn_scale, batch.seq_idx, batch.positions, attn, pool);
    matmul(lw.wo, attn, n, proj, pool);
    s.sum_over_tp(proj, n * H);
    add_into(x, proj, n * H, pool);

    // The next layer's K / V rows, asked for now so they arrive while this FFN's weights stream
    // (at short context attention otherwise waits on DRAM for each page in turn).
    if (l + 1 < cfg.num_layers) {
      paged_attention_prefetch(kv, l + 1, batch.seq_idx, batch.positions, kKvPrefetchBytes);
    }
    ffn_sublayer(cfg, lw, l, x, xn, proj, n, s, selected + static_cast<int64_t>(l) * n * top_k, pool);
  }

  final_logits(w, batch, x, n, s, pool, logits);
}

}  // namespace densa
