#include "model/arch_deepseek_v3.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"
#include "kernels/activation.h"
#include "kernels/dsa_attention.h"
#include "kernels/matmul.h"
#include "kernels/mla_attention.h"
#include "kernels/norm.h"
#include "model/ffn.h"
#include "model/mla_absorb.h"
#include "quant/dequantize.h"

namespace densa {

namespace {

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// YaRN's attention scale: 0.1 * m * ln(s) + 1 for s > 1.
double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

// The rotary dim whose wavelength makes `num_rotations` turns over `max_pos` positions.
double yarn_correction_dim(double num_rotations, int dim, double base, int max_pos) {
  return dim * std::log(max_pos / (num_rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

// LayerNorm of each of n rows of d values (eps 1e-6, weight and bias), in place.
void layernorm_rows(float* x, int64_t n, int d, const float* w, const float* b) {
  for (int64_t t = 0; t < n; ++t) {
    float* r = x + t * d;
    double mean = 0, var = 0;
    for (int i = 0; i < d; ++i) mean += r[i];
    mean /= d;
    for (int i = 0; i < d; ++i) var += (r[i] - mean) * (r[i] - mean);
    const double inv = 1.0 / std::sqrt(var / d + 1e-6);
    for (int i = 0; i < d; ++i) r[i] = static_cast<float>((r[i] - mean) * inv) * w[i] + b[i];
  }
}

// DSA: the lightning indexer picks each token's top index_topk positions, then MLA attends
// over those. qa: the normed q_a output [n, q_lora_rank]. Tokens whose context fits in
// index_topk take the dense kernel, one token at a time (it is batch invariant), so they equal
// dense MLA exactly.
void dsa_attention(const ModelConfig& cfg, const LayerWeights& lw, int layer, const float* xn, const float* qa,
                   int64_t n, const ForwardBatch& batch, const KvView& kv, std::span<const double> inv_freq,
                   float attn_factor, const float* q_abs, float scale, ForwardScratch& s, ThreadPool* pool,
                   float* o_lat) {
  const int Hi = cfg.dsa.index_n_heads, Di = cfg.dsa.index_head_dim, topk = cfg.dsa.index_topk;
  const int dr = cfg.mla.qk_rope_head_dim, H = cfg.num_heads, C = cfg.mla.kv_lora_rank, D = C + dr;
  float* iq = grow(s.dsa_q, n * Hi * Di);
  float* ik = grow(s.dsa_k, n * Di);
  float* iw = grow(s.dsa_w, n * Hi);
  matmul(lw.idx_wq_b, qa, n, iq, pool);
  matmul(lw.idx_wk, xn, n, ik, pool);
  layernorm_rows(ik, n, Di, lw.idx_k_norm_w.data(), lw.idx_k_norm_b.data());
  matmul(lw.idx_weights_proj, xn, n, iw, pool);
  const float head_scale = 1.0f / std::sqrt(static_cast<float>(Hi));
  for (int64_t i = 0; i < n * Hi; ++i) iw[i] *= head_scale;
  // RoPE on the leading qk_rope_head_dim dims of every indexer head and of the key.
  rope_with_freqs(iq, batch.positions.data(), n, Hi, int64_t{Hi} * Di, Di, dr, inv_freq, attn_factor,
                  cfg.mla.rope_interleave);
  rope_with_freqs(ik, batch.positions.data(), n, 1, Di, Di, dr, inv_freq, attn_factor, cfg.mla.rope_interleave);
  dsa_index_store(kv, layer, ik, batch.seq_idx, batch.positions);
  int32_t* selected = grow(s.dsa_selected, n * topk);
  int32_t* counts = grow(s.dsa_counts, n);
  dsa_select_topk(kv, layer, iq, iw, Hi, 1.0f / std::sqrt(static_cast<float>(Di)), topk, batch.seq_idx,
                  batch.positions, selected, counts, pool);
  for (int64_t t = 0; t < n; ++t) {
    const auto one = [&](std::span<const int32_t> v) { return v.subspan(static_cast<size_t>(t), 1); };
    if (counts[t] == batch.positions[t] + 1) {
      paged_mla_attention(kv, layer, q_abs + t * H * D, H, C, scale, one(batch.seq_idx), one(batch.positions),
                          o_lat + t * H * C, pool);
    } else {
      paged_mla_attention_sparse(kv, layer, q_abs + t * H * D, H, C, scale, one(batch.seq_idx), selected + t * topk,
                                 counts + t, topk, o_lat + t * H * C, pool);
    }
  }
}

// One MLA attention block: xn [n, hidden] -> proj [n, hidden]; stores the batch's latents.
void mla_attention(const ModelConfig& cfg, const LayerWeights& lw, int layer, const float* xn, int64_t n,
                   const ForwardBatch& batch, const KvView& kv, std::span<const double> inv_freq,
                   float attn_factor, float scale, ForwardScratch& s, ThreadPool* pool, float* proj) {
  const MlaConfig& m = cfg.mla;
  const int H = cfg.num_heads, dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim;
  const int C = m.kv_lora_rank, D = C + dr;
  float* q = grow(s.q, n * H * (dn + dr));
  if (m.q_lora_rank > 0) {
    float* qa = grow(s.up, n * m.q_lora_rank);
    matmul(lw.q_a, xn, n, qa, pool);
    rmsnorm(qa, lw.q_a_norm.data(), n, m.q_lora_rank, cfg.rms_norm_eps, qa);
    matmul(lw.q_b, qa, n, q, pool);
  } else {
    matmul(lw.wq, xn, n, q, pool);
  }
  float* latent = grow(s.k, n * D);
  matmul(lw.kv_a, xn, n, latent, pool);
  for (int64_t t = 0; t < n; ++t) {
    rmsnorm(latent + t * D, lw.kv_a_norm.data(), 1, C, cfg.rms_norm_eps, latent + t * D);
  }
  rope_with_freqs(q + dn, batch.positions.data(), n, H, int64_t{H} * (dn + dr), dn + dr, dr, inv_freq,
                  attn_factor, m.rope_interleave);
  rope_with_freqs(latent + C, batch.positions.data(), n, 1, D, D, dr, inv_freq, attn_factor, m.rope_interleave);
  mla_kv_store(kv, layer, latent, C, batch.seq_idx, batch.positions);

  float* q_abs = grow(s.v, n * H * D);
  mla_absorb_queries(m, lw.mla_uk, H, q, n, q_abs, pool);
  float* o_lat = grow(s.attn, n * H * C);
  if (cfg.is_dsa()) {
    dsa_attention(cfg, lw, layer, xn, s.up.data(), n, batch, kv, inv_freq, attn_factor, q_abs, scale, s, pool, o_lat);
  } else {
    paged_mla_attention(kv, layer, q_abs, H, C, scale, batch.seq_idx, batch.positions, o_lat, pool);
  }
  float* attn_out = grow(s.gate, n * H * dv);
  mla_expand_values(m, lw.mla_uv_t, H, o_lat, n, attn_out, pool);
  matmul(lw.wo, attn_out, n, proj, pool);
}

}  // namespace

void prepare_mla_weights(ModelWeights& w) {
  const ModelConfig& cfg = w.config;
  if (!cfg.is_mla()) return;
  const MlaConfig& m = cfg.mla;
  const int H = cfg.num_heads, dn = m.qk_nope_head_dim, dv = m.v_head_dim, C = m.kv_lora_rank;
  for (LayerWeights& lw : w.layers) {
    auto* uk = reinterpret_cast<float*>(w.alloc_owned(sizeof(float) * H * dn * C));
    auto* uv_t = reinterpret_cast<float*>(w.alloc_owned(sizeof(float) * H * C * dv));
    mla_split_kv_b(lw.kv_b, m, H, uk, uv_t);
    lw.mla_uk = mla_f32_view(uk, int64_t{H} * dn, C);
    lw.mla_uv_t = mla_f32_view(uv_t, int64_t{H} * C, dv);
  }
}

std::vector<double> mla_rope_inv_freq(const ModelConfig& c) {
  const int d = c.mla.qk_rope_head_dim;
  const double base = c.rope_theta;
  std::vector<double> inv(static_cast<size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) inv[i] = std::pow(base, -2.0 * i / d);
  const YarnScaling& y = c.yarn;
  if (y.factor <= 0.0f) return inv;
  // Interpolate (divide by factor) the low frequencies, keep (extrapolate) the high ones, with
  // a linear ramp between the dims that turn beta_fast and beta_slow times over the original
  // context.
  const int orig = y.original_max_position_embeddings;
  const double low = std::max(std::floor(yarn_correction_dim(y.beta_fast, d, base, orig)), 0.0);
  double high = std::min(std::ceil(yarn_correction_dim(y.beta_slow, d, base, orig)), d - 1.0);
  if (low == high) high += 0.001;
  for (int i = 0; i < d / 2; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolate = 1.0 - ramp;
    inv[i] = inv[i] / y.factor * (1.0 - extrapolate) + inv[i] * extrapolate;
  }
  return inv;
}

float mla_rope_attn_factor(const ModelConfig& c) {
  const YarnScaling& y = c.yarn;
  if (y.factor <= 0.0f) return 1.0f;
  return static_cast<float>(yarn_mscale(y.factor, y.mscale) / yarn_mscale(y.factor, y.mscale_all_dim));
}

float mla_softmax_scale(const ModelConfig& c) {
  double scale = 1.0 / std::sqrt(static_cast<double>(c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim));
  if (c.yarn.factor > 0.0f && c.yarn.mscale_all_dim != 0.0f) {
    const double m = yarn_mscale(c.yarn.factor, c.yarn.mscale_all_dim);
    scale *= m * m;
  }
  return static_cast<float>(scale);
}

void forward_deepseek_v3(const ModelWeights& w, const ForwardBatch& batch, const KvView& kv,
                         ForwardScratch& s, ThreadPool* pool, float* logits) {
  const ModelConfig& cfg = w.config;
  CHECK(cfg.is_mla()) << "forward_deepseek_v3 on a non-MLA config";
  CHECK(!cfg.is_dsa() || kv.layout.index_dim == cfg.dsa.index_head_dim) << "DSA forward needs index keys in the KV layout";
  CHECK(kv.layout.is_latent() && kv.layout.latent_dim == cfg.mla.kv_lora_rank + cfg.mla.qk_rope_head_dim)
      << "MLA forward needs a latent KV layout of kv_lora_rank + qk_rope_head_dim";
  CHECK(w.layers.empty() || !w.layers[0].mla_uv_t.empty()) << "MLA forward before prepare_mla_weights";
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  CHECK(batch.positions.size() == batch.tokens.size() && batch.seq_idx.size() == batch.tokens.size());
  const int H = cfg.hidden_size;
  float* x = grow(s.x, n * H);
  float* xn = grow(s.xn, n * H);
  float* proj = grow(s.proj, n * H);
  const int top_k = std::max(1, cfg.num_experts_per_tok);
  int32_t* selected = grow(s.selected_experts, static_cast<size_t>(cfg.num_layers) * n * top_k);
  embed_tokens(w, batch.tokens, x, s);
  const std::vector<double> inv_freq = mla_rope_inv_freq(cfg);
  const float attn_factor = mla_rope_attn_factor(cfg), scale = mla_softmax_scale(cfg);

  // The last layer's FFN only for the logit rows (forward.h), unless asked for all. Its attention
  // still runs for every token: its latents are stored with it.
  const bool narrow_last = !s.full_last_layer && static_cast<int64_t>(batch.logit_rows.size()) < n;
  for (int l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    rmsnorm(x, lw.attn_norm.data(), n, H, cfg.rms_norm_eps, xn, pool);
    mla_attention(cfg, lw, l, xn, n, batch, kv, inv_freq, attn_factor, scale, s, pool, proj);
    s.sum_over_tp(proj, n * H);
    add_into(x, proj, n * H, pool);

    if (narrow_last && l + 1 == cfg.num_layers) {
      return last_layer_ffn_and_logits(w, batch, gather_logit_rows(batch, x, H, s), xn, proj, s,
                                       selected + static_cast<int64_t>(l) * n * top_k, pool, logits);
    }
    ffn_sublayer(cfg, lw, l, x, xn, proj, n, s, selected + static_cast<int64_t>(l) * n * top_k, pool);
  }

  final_logits(w, batch, x, n, s, pool, logits);
}

}  // namespace densa
