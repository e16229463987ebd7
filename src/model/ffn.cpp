#include "model/ffn.h"

#include <algorithm>
#include <numeric>
#include <chrono>
#include <cmath>

#include "core/check.h"
#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/moe_routing.h"

namespace densa {
namespace {

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

void route(const ModelConfig& cfg, const LayerWeights& lw, const float* logits, int64_t n, int32_t* ids,
           float* weights) {
  switch (cfg.moe_routing) {
    case MoeRouting::kSoftmaxTopK:
      route_softmax_topk(logits, n, cfg.num_experts, cfg.num_experts_per_tok, cfg.norm_topk_prob, ids, weights);
      return;
    case MoeRouting::kSigmoidGrouped:
      route_sigmoid_grouped(logits, lw.router_bias.empty() ? nullptr : lw.router_bias.data(), n, cfg.num_experts,
                            cfg.num_experts_per_tok, cfg.n_group, cfg.topk_group, cfg.norm_topk_prob,
                            cfg.routed_scaling_factor, ids, weights);
      return;
  }
}

// out[t] = 0 + the routing weight x y of each of token t's rows (s.expert_slot) in ascending
// expert order, skipping experts another rank holds. A token's rows ascend with their experts
// (rows are grouped by expert), so sorting its K row numbers gives that order; each token's sum
// is made in one place, so splitting the tokens over the pool changes no bit.
void sum_routed_rows(const LayerWeights& lw, const ForwardScratch& s, const float* y, int64_t n, int K, int64_t H,
                     ThreadPool* pool, float* out) {
  const std::vector<int64_t>& first = s.expert_first;
  parallel_for_elems(pool, n, K * H, [&](int64_t t0, int64_t t1) {
    std::vector<int64_t> rows(static_cast<size_t>(K));
    for (int64_t t = t0; t < t1; ++t) {
      rows.assign(s.expert_slot.begin() + t * K, s.expert_slot.begin() + (t + 1) * K);
      std::sort(rows.begin(), rows.end());
      float* o = out + t * H;
      std::fill_n(o, H, 0.0f);
      for (const int64_t j : rows) {
        const auto e = std::upper_bound(first.begin(), first.end(), j) - first.begin() - 1;
        if (lw.expert_down[e].empty()) continue;
        const float wj = s.expert_weight[j];
        const float* yj = y + j * H;
        for (int64_t d = 0; d < H; ++d) o[d] += wj * yj[d];
      }
    }
  });
}

}  // namespace

void swiglu_ffn(const WeightView& gate_w, const WeightView& up_w, const WeightView& down_w, const float* in,
                int64_t n, float* gate, float* up, float* out, ThreadPool* pool) {
  const MatmulJob gate_up[2] = {{gate_w, in, n, gate}, {up_w, in, n, up}};
  matmul_many(gate_up, pool);
  silu_mul(gate, up, n * gate_w.rows, pool);
  matmul(down_w, gate, n, out, pool);
}

void moe_ffn(const ModelConfig& cfg, const LayerWeights& lw, const float* xn, int64_t n, ForwardScratch& s,
             int32_t* selected, ThreadPool* pool, float* out) {
  const int E = cfg.num_experts, K = cfg.num_experts_per_tok, H = cfg.hidden_size;
  float* router = grow(s.router, n * E);
  // fp32 x for a BF16 / F16 router too (MatmulJob::f32_x): an expert choice flipped by rounding
  // changes a token's whole FFN output.
  const MatmulJob route_job{lw.router, xn, n, router, /*f32_x=*/true};
  matmul_many(std::span<const MatmulJob>(&route_job, 1), pool);
  int32_t* ids = grow(s.topk_ids, n * K);
  float* wts = grow(s.topk_weights, n * K);
  route(cfg, lw, router, n, ids, wts);
  std::copy_n(ids, n * K, selected);

  // Tokens grouped per expert (ascending expert, then ascending token): expert e's rows are
  // [first[e], first[e + 1]) of expert_rows / expert_weight and of the stacked buffers below.
  std::vector<int64_t>& first = s.expert_first;
  first.assign(E + 1, 0);
  for (int64_t i = 0; i < n * K; ++i) {
    CHECK(ids[i] >= 0 && ids[i] < E) << "expert id " << ids[i];
    ++first[ids[i] + 1];
  }
  for (int e = 0; e < E; ++e) first[e + 1] += first[e];
  const int64_t M = first[E];
  s.expert_rows.resize(M);
  s.expert_weight.resize(M);
  s.expert_slot.resize(n * K);  // token t's k-th choice is row expert_slot[t * K + k]
  {
    std::vector<int64_t>& at = s.expert_fill;
    at.assign(first.begin(), first.end() - 1);
    for (int64_t t = 0; t < n; ++t) {
      for (int k = 0; k < K; ++k) {
        const int e = ids[t * K + k];
        s.expert_rows[at[e]] = static_cast<int32_t>(t);
        s.expert_weight[at[e]] = wts[t * K + k];
        s.expert_slot[t * K + k] = at[e];
        ++at[e];
      }
    }
  }
  const bool shared = !lw.shared_gate.empty();
  // Experts held by another expert-parallel rank are empty views (model/shard.h): their rows
  // are skipped here and summed in by the rank that holds them.
  int64_t I = 0;
  for (const WeightView& g : lw.expert_gate) {
    if (!g.empty()) {
      I = g.rows;
      break;
    }
  }
  const int64_t Is = shared ? lw.shared_gate.rows : 0;
  float* gate = grow(s.gate, M * I + n * Is);
  float* up = grow(s.up, M * I + n * Is);
  float* y = grow(s.expert_out, (M + (shared ? n : 0)) * H);
  float* shared_gate = gate + M * I;
  float* shared_up = up + M * I;
  float* shared_y = y + M * H;

  // Every active expert's gate and up (and the shared expert's) in one pass over the pool,
  // then every down: tokens routed to one expert share one pass over its weights.
  const auto gemm_begin = s.time_experts ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  std::vector<MatmulJob>& jobs = s.expert_jobs;
  jobs.clear();
  for (int e = 0; e < E; ++e) {
    const int64_t m = first[e + 1] - first[e];
    if (m == 0 || lw.expert_gate[e].empty()) continue;
    CHECK(lw.expert_gate[e].rows == I) << "expert " << e << " intermediate size";
    // The expert's tokens read in place: each token's x is rounded once for all its experts.
    const int32_t* rows = s.expert_rows.data() + first[e];
    jobs.push_back({.w = lw.expert_gate[e], .x = xn, .n = m, .y = gate + first[e] * I, .x_rows = rows, .x_rows_of = n});
    jobs.push_back({.w = lw.expert_up[e], .x = xn, .n = m, .y = up + first[e] * I, .x_rows = rows, .x_rows_of = n});
  }
  if (shared) {
    jobs.push_back({lw.shared_gate, xn, n, shared_gate});
    jobs.push_back({lw.shared_up, xn, n, shared_up});
  }
  matmul_many(jobs, pool);
  silu_mul(gate, up, M * I, pool);
  if (shared) silu_mul(shared_gate, shared_up, n * Is, pool);
  jobs.clear();
  for (int e = 0; e < E; ++e) {
    const int64_t m = first[e + 1] - first[e];
    if (m > 0 && !lw.expert_down[e].empty()) jobs.push_back({lw.expert_down[e], gate + first[e] * I, m, y + first[e] * H});
  }
  if (shared) jobs.push_back({lw.shared_down, shared_gate, n, shared_y});
  matmul_many(jobs, pool);
  if (s.time_experts)
    s.expert_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - gemm_begin).count();

  sum_routed_rows(lw, s, y, n, K, H, pool, out);
  if (!shared) return;
  for (int64_t t = 0; t < n; ++t) {
    float g = 1.0f;
    if (!lw.shared_expert_gate.empty()) {
      float dot = 0.0f;
      for (int d = 0; d < H; ++d) dot += lw.shared_expert_gate[d] * xn[t * H + d];
      g = 1.0f / (1.0f + std::exp(-dot));
    }
    for (int d = 0; d < H; ++d) out[t * H + d] += g * shared_y[t * H + d];
  }
}

void ffn_sublayer(const ModelConfig& cfg, const LayerWeights& lw, int l, float* x, float* xn, float* proj,
                  int64_t n, ForwardScratch& s, int32_t* selected, ThreadPool* pool) {
  const int64_t H = cfg.hidden_size;
  rmsnorm(x, lw.ffn_norm.data(), n, H, cfg.rms_norm_eps, xn, pool);
  if (cfg.is_moe_layer(l)) {
    moe_ffn(cfg, lw, xn, n, s, selected, pool, proj);
    s.sum_over_world(proj, n * H);
  } else {
    std::fill_n(selected, n * std::max(1, cfg.num_experts_per_tok), -1);
    const int64_t I = cfg.intermediate_size;
    swiglu_ffn(lw.w_gate, lw.w_up, lw.w_down, xn, n, grow(s.gate, n * I), grow(s.up, n * I), proj, pool);
    s.sum_over_tp(proj, n * H);
  }
  add_into(x, proj, n * H, pool);
}

float* gather_logit_rows(const ForwardBatch& batch, const float* x, int64_t H, ForwardScratch& s) {
  const int64_t m = static_cast<int64_t>(batch.logit_rows.size());
  float* xl = grow(s.last_x, m * H);
  for (int64_t j = 0; j < m; ++j) std::copy_n(x + static_cast<int64_t>(batch.logit_rows[j]) * H, H, xl + j * H);
  return xl;
}

void last_layer_ffn_and_logits(const ModelWeights& w, const ForwardBatch& batch, float* xl, float* xn, float* proj,
                               ForwardScratch& s, int32_t* selected, ThreadPool* pool, float* logits) {
  const ModelConfig& cfg = w.config;
  const int64_t n = static_cast<int64_t>(batch.tokens.size()), m = static_cast<int64_t>(batch.logit_rows.size());
  const int top_k = std::max(1, cfg.num_experts_per_tok);
  std::fill_n(selected, n * top_k, -1);
  if (m == 0) return;
  int32_t* chosen = grow(s.last_selected, static_cast<size_t>(m * top_k));
  ffn_sublayer(cfg, w.layers[cfg.num_layers - 1], cfg.num_layers - 1, xl, xn, proj, m, s, chosen, pool);
  for (int64_t j = 0; j < m; ++j) {
    std::copy_n(chosen + j * top_k, top_k, selected + static_cast<int64_t>(batch.logit_rows[j]) * top_k);
  }
  std::vector<int32_t>& rows = s.last_rows;  // the m rows of xl, in order
  rows.resize(static_cast<size_t>(m));
  std::iota(rows.begin(), rows.end(), 0);
  final_logits(w, ForwardBatch{.logit_rows = rows}, xl, m, s, pool, logits);
}

void final_logits(const ModelWeights& w, const ForwardBatch& batch, const float* x, int64_t n, ForwardScratch& s,
                  ThreadPool* pool, float* logits) {
  const int64_t H = w.config.hidden_size;
  const int64_t num_logits = static_cast<int64_t>(batch.logit_rows.size());
  if (num_logits == 0) return;
  if (logits == nullptr) {
    // A rank that does not sample (forward.h); a vocabulary-parallel slice would owe the sum.
    CHECK(w.lm_head.rows == w.config.vocab_size) << "a vocabulary-parallel lm_head needs its logits computed";
    return;
  }
  float* rows = grow(s.final_rows, num_logits * H);
  for (int64_t j = 0; j < num_logits; ++j) {
    const int32_t r = batch.logit_rows[j];
    CHECK(r >= 0 && r < n);
    std::copy_n(x + static_cast<int64_t>(r) * H, H, rows + j * H);
  }
  rmsnorm(rows, w.final_norm.data(), num_logits, H, w.config.rms_norm_eps, rows);
  const int64_t V = w.config.vocab_size;
  if (w.lm_head.rows == V) {
    matmul(w.lm_head, rows, num_logits, logits, pool);
    return;
  }
  // Vocabulary-parallel (model/shard.h): this rank's rows of every logit row, placed at its
  // offset in zeros; the sum over the tp group (each logit from exactly one rank, the others
  // adding +0) gives every rank of the group the whole rows, bit for bit.
  CHECK(s.parallel != nullptr && s.parallel->tp != nullptr && V % w.lm_head.rows == 0) << "lm_head slice without its group";
  const int64_t part = w.lm_head.rows, offset = static_cast<int64_t>(w.parallel.tp_rank) * part;
  float* mine = grow(s.logits_part, num_logits * part);
  matmul(w.lm_head, rows, num_logits, mine, pool);
  std::fill_n(logits, num_logits * V, 0.0f);
  for (int64_t j = 0; j < num_logits; ++j) std::copy_n(mine + j * part, part, logits + j * V + offset);
  s.sum_over_tp(logits, num_logits * V);
}

}  // namespace densa
