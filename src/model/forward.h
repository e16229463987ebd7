#pragma once
// One forward pass of a GQA decoder (Llama, Mixtral, Qwen2/3-MoE, GLM-4.5 families) over a
// batch of tokens from any number of sequences, reading and writing the paged KV cache through a KvView.
//
// Inputs are arguments (no hidden state): forward(weights, batch, kv, scratch, pool, logits).
#include <cstdint>
#include <span>
#include <vector>

#include "core/ids.h"
#include "core/thread_pool.h"
#include "kernels/kv_view.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "model/mla_absorb.h"
#include "model/model_weights.h"

namespace densa {

struct ForwardBatch {
  std::span<const TokenId> tokens;      // [num_tokens]
  std::span<const int32_t> positions;   // [num_tokens] position of each token in its sequence
  std::span<const int32_t> seq_idx;     // [num_tokens] sequence index into the KvView
  std::span<const int32_t> logit_rows;  // [num_logits] token indices whose logits are wanted
};

// Reusable buffers; forward() grows them as needed and never shrinks them.
struct ForwardScratch {
  std::vector<float> x, xn, q, k, v, attn, proj;  // [num_tokens, *]
  std::vector<float> gate, up;                    // [num_tokens, intermediate]
  std::vector<float> router;                      // [num_tokens, num_experts]
  std::vector<float> expert_out;                  // [tokens routed to one expert, hidden]
  std::vector<int32_t> expert_rows;               // token indices grouped per expert
  std::vector<float> expert_weight;               // their routing weights
  std::vector<int64_t> expert_first, expert_fill;  // per expert: first row in expert_rows
  std::vector<int64_t> expert_slot;                 // per (token, choice): its row in expert_rows
  std::vector<MatmulJob> expert_jobs;             // the grouped expert products
  std::vector<int32_t> topk_ids;                  // [num_tokens, top_k]
  std::vector<float> topk_weights;                // [num_tokens, top_k]
  std::vector<float> final_rows;                  // [num_logits, hidden]
  // The last layer for the logit rows alone (forward): their hidden states [num_logits, hidden],
  // sequences, positions, RoPE table, routing choices [num_logits, top_k], and 0 .. num_logits - 1.
  std::vector<float> last_x;
  std::vector<int32_t> last_seq_idx, last_positions, last_selected, last_rows;
  RopeTable last_rope;
  // Run the last layer for every token, not only the logit rows: for a caller that reads the
  // whole routing record (bench's expert-count replay). Off: the same logits, less work.
  bool full_last_layer = false;
  std::vector<float> logits_part;                 // vocabulary-parallel: [num_logits, this rank's vocab rows]
  RopeTable rope;                                 // this batch's cos / sin, shared by all layers
  // DSA (model/arch_deepseek_v3): indexer queries, keys, head weights; the positions each
  // token attends to [num_tokens, index_topk] and how many.
  std::vector<float> dsa_q, dsa_k, dsa_w;
  std::vector<int32_t> dsa_selected, dsa_counts;
  // Experts chosen per layer (the MoE routing record): [num_layers][num_tokens][top_k];
  // -1 for the tokens of dense layers.
  std::vector<int32_t> selected_experts;
  // Set time_experts to have forward() store in expert_seconds the time its MoE layers spent
  // in the experts' SwiGLU GEMMs (two clock reads per expert and layer; off: none).
  bool time_experts = false;
  double expert_seconds = 0;
  // Tensor / expert parallel (model/shard.h): the weights are one rank's slice, and forward()
  // completes each row-parallel product with a sum over the group: after the attention output
  // projection and a dense FFN over `tp`, after a MoE FFN over `world`. Null: one process.
  const ParallelComms* parallel = nullptr;
  // x[0, n) summed over the tp group / the world (no-ops for one process).
  void sum_over_tp(float* x, int64_t n) const {
    if (parallel != nullptr && parallel->tp != nullptr) parallel->tp->all_reduce_sum(x, n);
  }
  void sum_over_world(float* x, int64_t n) const {
    if (parallel != nullptr && parallel->world != nullptr) parallel->world->all_reduce_sum(x, n);
  }
};

// x[t] = the embedding row of tokens[t], for t in [0, tokens.size()). With a vocabulary-
// parallel embedding (model/shard.h: this rank holds rows [tp_rank * rows, + rows)), a rank
// fills the tokens its rows hold, zeros the others, and the rows are summed over the tp group:
// every token's row comes from exactly one rank, so x holds the same values as one process.
void embed_tokens(const ModelWeights& w, std::span<const TokenId> tokens, float* x, const ForwardScratch& scratch);

// logits: [batch.logit_rows.size(), vocab] fp32, or null for none: the logit rows still choose
// the rows the last layer runs for (below), so a rank that does not sample passes its leader's
// rows and every rank runs the same collectives (a vocabulary-parallel lm_head needs logits).
// With a vocabulary-parallel lm_head (model/shard.h) every rank of the tp group must run the
// same logit rows: the slices are summed over the group. Stores K/V of every token of the batch.
// The last layer runs past its K/V projections only for the logit rows (no later step reads the
// other tokens' outputs of that layer; a prefill chunk without logits stops at its K/V), with the
// logits the whole layer would give, bit for bit; its routing record holds -1 for the other
// tokens. scratch.full_last_layer runs it for every token. (The MLA path, forward_deepseek_v3,
// runs its last layer's attention for every token and its FFN for the logit rows.)
// Precondition: every token's page is mapped in kv, and all positions before a token's
// position in its sequence are already stored (earlier steps or earlier in this batch).
void forward(const ModelWeights& w, const ForwardBatch& batch, const KvView& kv,
             ForwardScratch& scratch, ThreadPool* pool, float* logits);

}  // namespace densa
