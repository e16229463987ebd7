#pragma once
// MoE routing: router logits -> the experts each token uses and their weights. Pure
// functions over arrays, the oracle-sized core of a MoE layer (tests/model/moe_routing_test).
// Outputs ids/weights: [n, top_k], each token's experts in selection order; every top-k pick
// breaks ties towards the lower expert id.
#include <cstdint>

namespace densa {

// Mixtral / Qwen-MoE: softmax over all num_experts logits (fp32), keep the top_k
// probabilities, and if norm_topk_prob divide them by their sum.
void route_softmax_topk(const float* logits, int64_t n, int num_experts, int top_k, bool norm_topk_prob,
                        int32_t* ids, float* weights);

// GLM-4.5 / DeepSeek-V3 (noaux_tc): s = sigmoid(logit); selection score c = s + bias[e].
// Groups of num_experts / n_group consecutive experts are ranked by the sum of their two
// largest c; experts outside the best topk_group groups get c = 0.0 (as in the HF reference,
// not -inf); the top_k largest c are chosen. Weights are the chosen s (not c), divided by
// (their sum + 1e-20) if norm_topk_prob, then multiplied by scaling.
// Preconditions: num_experts % n_group == 0, group size >= 2, 1 <= topk_group <= n_group.
void route_sigmoid_grouped(const float* logits, const float* bias, int64_t n, int num_experts, int top_k,
                           int n_group, int topk_group, bool norm_topk_prob, float scaling, int32_t* ids,
                           float* weights);

}  // namespace densa
