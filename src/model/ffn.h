#pragma once
// The feed-forward half of a decoder layer: a dense SwiGLU, or a MoE block (router ->
// routing variant of the config -> routed experts, plus an optional shared expert).
#include <cstdint>

#include "core/thread_pool.h"
#include "model/forward.h"

namespace densa {

// out[n, hidden] = down(silu(gate . x) * (up . x)); gate/up: [n, gate_w.rows] scratch.
void swiglu_ffn(const WeightView& gate_w, const WeightView& up_w, const WeightView& down_w, const float* in,
                int64_t n, float* gate, float* up, float* out, ThreadPool* pool);

// out[n, hidden] = sum over each token's experts (ascending id, so the result does not depend
// on the batch) of weight * expert(xn), + [sigmoid(shared_expert_gate . xn) *] shared(xn).
// selected: [n, top_k] receives the chosen expert ids (the routing record).
void moe_ffn(const ModelConfig& cfg, const LayerWeights& lw, const float* xn, int64_t n, ForwardScratch& s,
             int32_t* selected, ThreadPool* pool, float* out);

// The FFN half of decoder layer `l`, shared by every architecture's forward pass:
// xn = rmsnorm(x), proj = MoE or dense SwiGLU of xn, x += proj. selected: [n, top_k] of this
// layer's routing record (-1 for a dense layer). xn and proj are [n, hidden] scratch.
void ffn_sublayer(const ModelConfig& cfg, const LayerWeights& lw, int l, float* x, float* xn, float* proj,
                  int64_t n, ForwardScratch& s, int32_t* selected, ThreadPool* pool);

// The last layer for the batch's m logit rows alone (forward.h): their hidden states x rows
// batch.logit_rows copied into scratch.last_x [m, hidden], which is returned.
float* gather_logit_rows(const ForwardBatch& batch, const float* x, int64_t hidden, ForwardScratch& scratch);

// The last layer's FFN and the logits, for the m logit rows alone: xl [m, hidden] holds their
// hidden states after the layer's attention (xn, proj: [m, hidden] scratch). Their routing
// choices go to rows batch.logit_rows of `selected` (the layer's record, [n, top_k]; every other
// row -1); logits [m, vocab] as final_logits gives them. Every step is per token, so the rows
// get the bits the whole layer would give them. With no logit rows it only fills the record.
void last_layer_ffn_and_logits(const ModelWeights& w, const ForwardBatch& batch, float* xl, float* xn, float* proj,
                               ForwardScratch& scratch, int32_t* selected, ThreadPool* pool, float* logits);

// The logits of the batch's logit rows from the final hidden states x [n, hidden]: final
// RMSNorm, then lm_head. logits: [batch.logit_rows.size(), vocab], or null for none (only with a
// whole lm_head: a vocabulary-parallel slice must take part in the group's sum).
void final_logits(const ModelWeights& w, const ForwardBatch& batch, const float* x, int64_t n, ForwardScratch& s,
                  ThreadPool* pool, float* logits);

}  // namespace densa
