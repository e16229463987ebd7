#pragma once
// Multi-head latent attention (DeepSeek-V3 / Kimi K2) over a paged latent KV cache: the
// absorbed-weight form. The cache holds one latent row per token per layer (KvLayout with
// latent_dim = kv_lora_rank + qk_rope_head_dim): [c_kv | k_pe]. With W_UK / W_UV absorbed
// into the query and the output (model/arch_deepseek_v3.cpp), every query head attends over
// the shared latent rows: score = q_abs . row, output = sum p * c_kv. The simple form
// (decompress K and V with kv_b_proj) is the oracle in kernels/reference/mla_ref.h.
#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "kernels/kv_view.h"

namespace densa {

// Writes the latent row of n tokens. latent: [n, latent_dim]; token i goes to sequence
// seq_idx[i] at position positions[i]. FP8 rows use a dynamic amax / 448 scale per row, or
// (KvScaleMode::kStatic) kv.static_scales [layer][c_kv = 0 | k_pe = 1]: the first value_dim
// (kv_lora_rank) values of the row take the c_kv scale, the rest the k_pe scale.
void mla_kv_store(const KvView& kv, int layer, const float* latent, int value_dim, std::span<const int32_t> seq_idx,
                  std::span<const int32_t> positions);

// out[i, h, :] = sum_p softmax_p(q[i, h] . row_p * scale) * row_p[0 .. value_dim) over the
// stored rows p <= positions[i] of sequence seq_idx[i]. q: [n, num_heads, latent_dim]
// (absorbed nope part, then the rope part); out: [n, num_heads, value_dim] with value_dim =
// kv_lora_rank (the c_kv prefix of the row). Online softmax over tiles of 16 positions aligned
// on absolute position, one work item per (token, chunk of heads): batch invariant.
void paged_mla_attention(const KvView& kv, int layer, const float* q, int num_heads, int value_dim,
                         float scale, std::span<const int32_t> seq_idx,
                         std::span<const int32_t> positions, float* out, ThreadPool* pool);

// Interleaved or rotate-half rotary embedding with given per-pair inverse frequencies.
// For token t and head h the rot_dim values at x + t * token_stride + h * head_stride are
// rotated: pair i is (2i, 2i+1) when interleaved (DeepSeek checkpoints), else (i, i +
// rot_dim/2); angle = positions[t] * inv_freq[i]; both outputs are multiplied by
// attn_factor (YaRN's cos/sin scale). Angles in double.
void rope_with_freqs(float* x, const int32_t* positions, int64_t n, int num_heads,
                     int64_t token_stride, int64_t head_stride, int rot_dim,
                     std::span<const double> inv_freq, float attn_factor, bool interleaved);

}  // namespace densa
