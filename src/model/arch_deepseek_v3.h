#pragma once
// deepseek_v3 (DeepseekV3ForCausalLM: DeepSeek-V3, Kimi K2): multi-head latent attention
// over a latent KV cache, YaRN RoPE, and the GLM-style MoE FFN (model/ffn.h).
//
// Attention per layer (n tokens, H heads; nope / rope / v = qk_nope_head_dim /
// qk_rope_head_dim / v_head_dim, C = kv_lora_rank):
//   q      = q_b(rmsnorm(q_a(x), q_a_norm))  or q_proj(x)      [n, H, nope + rope]
//   latent = kv_a_proj_with_mqa(x) = [c_kv | k_pe]              [n, C + rope]
//   c_kv   = rmsnorm(c_kv, kv_a_norm); RoPE (YaRN, interleaved pairs) on q_pe and k_pe
//   store [c_kv | k_pe] per token per layer (KvLayout::latent_dim = C + rope)
//   absorbed attention: q_abs[h] = [W_UK_h^T q_nope_h | q_pe_h], o_lat = latent attention
//   (kernels/mla_attention.h), out_h = W_UV_h o_lat_h, then o_proj.
// W_UK_h / W_UV_h are the nope / v rows of head h in kv_b_proj. The result equals HF's simple
// form (decompress K/V with kv_b_proj) up to float rounding (tests/model/deepseek_v3_test.cpp).
//
// RoPE: DeepSeek checkpoints keep q_pe / k_pe interleaved; HF de-interleaves them and applies
// rotate-half. densa rotates the adjacent pairs (2i, 2i+1) in place by pos * inv_freq[i]:
// the same rotation of the same pairs, only the order of the rotated dims differs, and that
// order is the same for q_pe and k_pe, so every score q . k is identical. rope_interleave
// false in config.json selects rotate-half pairing (i, i + rope/2) instead.
#include <vector>

#include "model/forward.h"

namespace densa {

// YaRN-blended inverse frequencies [qk_rope_head_dim / 2] (plain theta^(-2i/d) without
// rope_scaling), and the cos/sin factor mscale(factor, mscale) / mscale(factor, mscale_all_dim).
std::vector<double> mla_rope_inv_freq(const ModelConfig& c);
float mla_rope_attn_factor(const ModelConfig& c);
// (qk_nope + qk_rope)^-0.5, times mscale(factor, mscale_all_dim)^2 when YaRN sets mscale_all_dim.
float mla_softmax_scale(const ModelConfig& c);

// Builds every layer's mla_uk / mla_uv from its kv_b (dequantized once, exactly as a step
// dequantized it before) in w's arena. load_model calls it after quantize-on-load (with
// prepare_for_kernels, the default); forward needs it. A no-op for configs without MLA.
void prepare_mla_weights(ModelWeights& w);

// forward() for configs with is_mla(); same contract. kv must have a latent layout and
// prepare_mla_weights must have run.
void forward_deepseek_v3(const ModelWeights& w, const ForwardBatch& batch, const KvView& kv,
                         ForwardScratch& scratch, ThreadPool* pool, float* logits);

}  // namespace densa
