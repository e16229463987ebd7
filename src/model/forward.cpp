#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "quant/dequantize.h"

namespace densa {

namespace {

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Mixtral routing for every token: softmax over all router logits, keep the top-k (ties
// to the lower expert id), renormalise the kept probabilities to sum to 1.
void route(const float* router_logits, int64_t n, int num_experts, int top_k, int32_t* ids,
           float* weights) {
  std::vector<float> p(static_cast<size_t>(num_experts));
  for (int64_t t = 0; t < n; ++t) {
    std::copy_n(router_logits + t * num_experts, num_experts, p.begin());
    softmax(p.data(), num_experts);
    float sum = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      int best = -1;
      for (int e = 0; e < num_experts; ++e) {
        bool taken = false;
        for (int j = 0; j < k; ++j) taken |= ids[t * top_k + j] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      ids[t * top_k + k] = best;
      weights[t * top_k + k] = p[best];
      sum += p[best];
    }
    for (int k = 0; k < top_k; ++k) weights[t * top_k + k] /= sum;
  }
}

void swiglu(const WeightView& gate_w, const WeightView& up_w, const WeightView& down_w,
            const float* in, int64_t n, float* gate, float* up, float* out, ThreadPool* pool) {
  matmul(gate_w, in, n, gate, pool);
  matmul(up_w, in, n, up, pool);
  silu_mul(gate, up, n * gate_w.rows);
  matmul(down_w, gate, n, out, pool);
}

void moe_ffn(const ModelConfig& cfg, const LayerWeights& lw, const float* xn, int64_t n,
             ForwardScratch& s, int32_t* selected, ThreadPool* pool, float* out) {
  const int E = cfg.num_experts, K = cfg.num_experts_per_tok, H = cfg.hidden_size;
  const int I = cfg.intermediate_size;
  float* router = grow(s.router, n * E);
  matmul(lw.router, xn, n, router, pool);
  int32_t* ids = grow(s.topk_ids, n * K);
  float* wts = grow(s.topk_weights, n * K);
  route(router, n, E, K, ids, wts);
  std::copy_n(ids, n * K, selected);

  std::fill_n(out, n * H, 0.0f);
  // Tokens grouped per expert; each token accumulates its experts in ascending id order,
  // independent of the batch.
  for (int e = 0; e < E; ++e) {
    s.expert_rows.clear();
    s.expert_weight.clear();
    for (int64_t t = 0; t < n; ++t) {
      for (int k = 0; k < K; ++k) {
        if (ids[t * K + k] == e) {
          s.expert_rows.push_back(static_cast<int32_t>(t));
          s.expert_weight.push_back(wts[t * K + k]);
        }
      }
    }
    const int64_t m = static_cast<int64_t>(s.expert_rows.size());
    if (m == 0) continue;
    float* in = grow(s.expert_in, m * H);
    for (int64_t j = 0; j < m; ++j) std::copy_n(xn + s.expert_rows[j] * H, H, in + j * H);
    float* y = grow(s.expert_out, m * H);
    swiglu(lw.expert_gate[e], lw.expert_up[e], lw.expert_down[e], in, m, grow(s.gate, m * I),
           grow(s.up, m * I), y, pool);
    for (int64_t j = 0; j < m; ++j) {
      float* o = out + s.expert_rows[j] * H;
      const float wj = s.expert_weight[j];
      for (int d = 0; d < H; ++d) o[d] += wj * y[j * H + d];
    }
  }
}

}  // namespace

void forward(const ModelWeights& w, const ForwardBatch& batch, const KvView& kv,
             ForwardScratch& s, ThreadPool* pool, float* logits) {
  const ModelConfig& cfg = w.config;
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  CHECK(batch.positions.size() == batch.tokens.size() && batch.seq_idx.size() == batch.tokens.size());
  const int H = cfg.hidden_size, hd = cfg.head_dim;
  const int q_dim = cfg.num_heads * hd, kv_dim = cfg.num_kv_heads * hd;
  const int64_t ffn_dim = cfg.intermediate_size;

  float* x = grow(s.x, n * H);
  float* xn = grow(s.xn, n * H);
  float* q = grow(s.q, n * q_dim);
  float* k = grow(s.k, n * kv_dim);
  float* v = grow(s.v, n * kv_dim);
  float* attn = grow(s.attn, n * q_dim);
  float* proj = grow(s.proj, n * H);
  const int top_k = std::max(1, cfg.num_experts_per_tok);
  int32_t* selected = grow(s.selected_experts, static_cast<size_t>(cfg.num_layers) * n * top_k);

  for (int64_t t = 0; t < n; ++t) {
    const TokenId tok = batch.tokens[t];
    CHECK(tok >= 0 && tok < cfg.vocab_size) << "token id " << tok;
    dequantize_row(w.tok_embeddings, tok, x + t * H);
  }
  const float attn_scale = 1.0f / std::sqrt(static_cast<float>(hd));

  for (int l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    rmsnorm(x, lw.attn_norm.data(), n, H, cfg.rms_norm_eps, xn);
    matmul(lw.wq, xn, n, q, pool);
    matmul(lw.wk, xn, n, k, pool);
    matmul(lw.wv, xn, n, v, pool);
    rope_neox(q, batch.positions.data(), n, cfg.num_heads, hd, cfg.rope_theta);
    rope_neox(k, batch.positions.data(), n, cfg.num_kv_heads, hd, cfg.rope_theta);
    kv_store(kv, l, k, v, batch.seq_idx, batch.positions);
    paged_attention(kv, l, q, cfg.num_heads, attn_scale, batch.seq_idx, batch.positions, attn, pool);
    matmul(lw.wo, attn, n, proj, pool);
    for (int64_t i = 0; i < n * H; ++i) x[i] += proj[i];

    rmsnorm(x, lw.ffn_norm.data(), n, H, cfg.rms_norm_eps, xn);
    if (cfg.is_moe()) {
      moe_ffn(cfg, lw, xn, n, s, selected + static_cast<int64_t>(l) * n * top_k, pool, proj);
    } else {
      swiglu(lw.w_gate, lw.w_up, lw.w_down, xn, n, grow(s.gate, n * ffn_dim),
             grow(s.up, n * ffn_dim), proj, pool);
    }
    for (int64_t i = 0; i < n * H; ++i) x[i] += proj[i];
  }

  const int64_t num_logits = static_cast<int64_t>(batch.logit_rows.size());
  if (num_logits == 0) return;
  float* rows = grow(s.final_rows, num_logits * H);
  for (int64_t j = 0; j < num_logits; ++j) {
    const int32_t r = batch.logit_rows[j];
    CHECK(r >= 0 && r < n);
    std::copy_n(x + static_cast<int64_t>(r) * H, H, rows + j * H);
  }
  rmsnorm(rows, w.final_norm.data(), num_logits, H, cfg.rms_norm_eps, rows);
  matmul(w.lm_head, rows, num_logits, logits, pool);
}

}  // namespace densa
