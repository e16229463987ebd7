#pragma once
// DeepSeek Sparse Attention (GLM-5 glm_moe_dsa, DeepSeek-V3.2) over the paged latent cache.
// Per layer the cache holds, beside each token's latent row, the lightning indexer's key
// (KvLayout::index_dim values, FP8 e4m3 with one f32 amax / 448 scale per token). A query
// scores every earlier stored token with
//   s_p = sum_h w_h * relu(scale * q_h . k_p)        (h over the indexer's heads)
// keeps the top index_topk positions, and attends (MLA, absorbed form) over those only. The
// scoring's exact arithmetic (one fma chain per head in index-dimension order, the key's scale
// applied to the dot product) is kernels/internal/dsa_index_isa.h's contract; the AVX-512 and
// AVX2 kernels give the scalar twin's bits.
// A query whose context (position + 1) fits in index_topk keeps every position, and then
// model/arch_deepseek_v3 runs the dense kernel, so short contexts equal dense MLA exactly.
#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "kernels/kv_view.h"

namespace densa {

// Writes the indexer key of n tokens. keys: [n, index_dim].
void dsa_index_store(const KvView& kv, int layer, const float* keys, std::span<const int32_t> seq_idx,
                     std::span<const int32_t> positions);

// Top-k selection per token i: q [n, num_heads, index_dim], weights [n, num_heads]. Writes the
// selected positions of token i ascending to selected[i * topk ..] and their number to
// counts[i] (min(topk, positions[i] + 1)); ties in s_p go to the lower position.
void dsa_select_topk(const KvView& kv, int layer, const float* q, const float* weights, int num_heads,
                     float scale, int topk, std::span<const int32_t> seq_idx,
                     std::span<const int32_t> positions, int32_t* selected, int32_t* counts, ThreadPool* pool);

// paged_mla_attention (kernels/mla_attention.h) over the listed positions only: for token i,
// out[i, h] = sum over p in selected[i * topk .. + counts[i]) of softmax(q[i, h] . row_p *
// scale) * row_p[0 .. value_dim). The rows are gathered as stored into a scratch cache and the
// dense kernel runs over it (heads split over the pool), so it is that kernel's arithmetic.
void paged_mla_attention_sparse(const KvView& kv, int layer, const float* q, int num_heads, int value_dim,
                                float scale, std::span<const int32_t> seq_idx, const int32_t* selected,
                                const int32_t* counts, int topk, float* out, ThreadPool* pool);

// The indexer score s_p of every stored position p <= pos of one query (the selection's
// input), for tests and the benchmark. out: [pos + 1]. With a pool the positions are split
// over its threads; each s_p is the same arithmetic either way, so the scores are the same
// bits.
void dsa_index_scores(const KvView& kv, int layer, const float* q, const float* weights, int num_heads, float scale,
                      int seq, int32_t pos, float* out, ThreadPool* pool = nullptr);

}  // namespace densa
