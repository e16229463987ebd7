#pragma once
// Tensor- and expert-parallel sharding of loaded weights (comm/communicator.h ParallelLayout).
// Each rank keeps only its slice, so with N ranks it holds about 1/N of the sharded matrices:
//  - attention: heads split tp ways (query heads and their KV heads together): wq / wk / wv
//    (and their biases) keep the rank's rows, wo the matching columns (row-parallel output,
//    summed across the tp group after the product);
//  - dense FFN and each expert: gate / up keep a slice of rows, down the matching columns;
//  - routed experts: expert group ep_rank keeps experts [ep_rank E/ep, (ep_rank+1) E/ep), the
//    others become empty views; the shared expert lives in expert group 0 (split tp ways);
//  - MLA: query heads split (q_b or q_proj rows, kv_b rows, o_proj columns per head); the
//    latent projections q_a / kv_a, the DSA indexer and so the latent KV cache replicated;
//  - the vocabulary rows of lm_head and of the embeddings split tp ways when they divide
//    evenly (the logit slices and the embedding rows are summed over the tp group: each
//    token's row comes from one rank), else replicated; a tied head stays the embeddings'
//    slice; norms and router replicated.
// The config then describes one rank's slice (num_heads, num_kv_heads and the FFN widths
// divided by tp), so the forward pass and the KV layout need no other change; the sums that
// complete a row-parallel product are the forward pass's (ForwardScratch::parallel).
// Runs on the weights as stored, before quantize-on-load and kernel repacking (model_loader).
#include "comm/communicator.h"
#include "core/status.h"
#include "model/model_weights.h"

namespace densa {

// Refuses, naming the reason, a layout the model cannot take: counts not divisible, a split
// inside a quantization block or scale group, expert parallelism of a dense model.
Status shard_weights(ModelWeights& w, const ParallelLayout& layout);

}  // namespace densa
