#include "model/ffn.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kernels/activation.h"
#include "kernels/matmul.h"
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

}  // namespace

void swiglu_ffn(const WeightView& gate_w, const WeightView& up_w, const WeightView& down_w, const float* in,
                int64_t n, float* gate, float* up, float* out, ThreadPool* pool) {
  matmul(gate_w, in, n, gate, pool);
  matmul(up_w, in, n, up, pool);
  silu_mul(gate, up, n * gate_w.rows);
  matmul(down_w, gate, n, out, pool);
}

void moe_ffn(const ModelConfig& cfg, const LayerWeights& lw, const float* xn, int64_t n, ForwardScratch& s,
             int32_t* selected, ThreadPool* pool, float* out) {
  const int E = cfg.num_experts, K = cfg.num_experts_per_tok, H = cfg.hidden_size;
  const int64_t I = std::max(cfg.moe_intermediate_size, cfg.shared_expert_intermediate_size);
  float* router = grow(s.router, n * E);
  matmul(lw.router, xn, n, router, pool);
  int32_t* ids = grow(s.topk_ids, n * K);
  float* wts = grow(s.topk_weights, n * K);
  route(cfg, lw, router, n, ids, wts);
  std::copy_n(ids, n * K, selected);

  std::fill_n(out, n * H, 0.0f);
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
    const auto gemm_begin = s.time_experts ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    swiglu_ffn(lw.expert_gate[e], lw.expert_up[e], lw.expert_down[e], in, m, grow(s.gate, m * I),
               grow(s.up, m * I), y, pool);
    if (s.time_experts)
      s.expert_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - gemm_begin).count();
    for (int64_t j = 0; j < m; ++j) {
      float* o = out + s.expert_rows[j] * H;
      const float wj = s.expert_weight[j];
      for (int d = 0; d < H; ++d) o[d] += wj * y[j * H + d];
    }
  }
  if (lw.shared_gate.empty()) return;
  float* y = grow(s.expert_out, n * H);
  swiglu_ffn(lw.shared_gate, lw.shared_up, lw.shared_down, xn, n, grow(s.gate, n * I), grow(s.up, n * I), y, pool);
  for (int64_t t = 0; t < n; ++t) {
    float g = 1.0f;
    if (!lw.shared_expert_gate.empty()) {
      float dot = 0.0f;
      for (int d = 0; d < H; ++d) dot += lw.shared_expert_gate[d] * xn[t * H + d];
      g = 1.0f / (1.0f + std::exp(-dot));
    }
    for (int d = 0; d < H; ++d) out[t * H + d] += g * y[t * H + d];
  }
}

}  // namespace densa
