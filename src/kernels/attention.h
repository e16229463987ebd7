#pragma once
// Causal GQA attention over a paged KV cache (kernels/kv_view.h).
#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "kernels/kv_view.h"

namespace densa {

// Writes K and V rows of n tokens into their slots. k, v: [n, num_kv_heads * head_dim];
// token i goes to sequence seq_idx[i] at position positions[i] (its page must be mapped). Tokens
// in ascending (sequence, position) order are split over the pool (each writes its own slot);
// otherwise they are stored in order on this thread, so of two tokens on one slot the later wins.
void kv_store(const KvView& kv, int layer, const float* k, const float* v,
              std::span<const int32_t> seq_idx, std::span<const int32_t> positions, ThreadPool* pool = nullptr);

// out[i] = softmax(q[i] . K[0..pos_i]^T * scale) . V[0..pos_i] per query head, for token i of
// sequence seq_idx[i] at position positions[i]; keys at positions <= pos_i must be stored.
// q, out: [n, num_heads * head_dim]; query head h uses kv head h / (num_heads / num_kv_heads).
void paged_attention(const KvView& kv, int layer, const float* q, int num_heads, float scale,
                     std::span<const int32_t> seq_idx, std::span<const int32_t> positions,
                     float* out, ThreadPool* pool);

// Asks the memory system for the K and V rows (and dynamic FP8 scales) that paged_attention of
// `layer` will read for these tokens, without waiting for them: decode can issue it one layer
// ahead, so the rows arrive while that layer's weights stream instead of when attention needs
// them. Does nothing, and returns false, when they exceed max_bytes (long contexts and large
// batches read too much to park in cache). Changes no value.
bool paged_attention_prefetch(const KvView& kv, int layer, std::span<const int32_t> seq_idx,
                              std::span<const int32_t> positions, int64_t max_bytes);

}  // namespace densa
