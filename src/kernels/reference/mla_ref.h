#pragma once
// Naive oracles for kernels/mla_attention.h, double accumulation, one token at a time.
//   * mla_latent_attention: the latent-space attention exactly as the kernel defines it.
//   * mla_attention_decompressed: the simple MLA form (HF's): decompress K and V of every
//     head from the latent rows with kv_b_proj, then ordinary causal softmax attention. The
//     absorbed form (absorb W_UK into q, run the latent kernel, apply W_UV) must equal it.
#include <cstdint>
#include <span>

namespace densa::ref {

// q: [num_heads][latent_dim] (scaled by `scale` inside); latents: [pos+1][latent_dim];
// out: [num_heads][value_dim] = softmax(q . latents^T * scale) . latents[:, :value_dim].
void mla_latent_attention(const float* q, const float* latents, int32_t pos, int num_heads,
                          int latent_dim, int value_dim, float scale, float* out);

// q: [num_heads][nope + rope] (rope part already rotated); latents: [pos+1][kv_lora + rope]
// = [c_kv | k_pe] as stored; kv_b: [num_heads * (nope + v_dim)][kv_lora] fp32 (per head
// rows [W_UK (nope) | W_UV (v_dim)]). out: [num_heads][v_dim].
void mla_attention_decompressed(const float* q, const float* latents, int32_t pos, int num_heads,
                                int nope, int rope, int v_dim, int kv_lora, const float* kv_b,
                                float scale, float* out);

// Same contract as densa::rope_with_freqs, angles and products in double.
void rope_with_freqs(float* x, const int32_t* positions, int64_t n, int num_heads,
                     int64_t token_stride, int64_t head_stride, int rot_dim,
                     std::span<const double> inv_freq, float attn_factor, bool interleaved);

}  // namespace densa::ref
