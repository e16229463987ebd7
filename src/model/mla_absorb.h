#pragma once
// The absorbed products of multi-head latent attention (model/arch_deepseek_v3.h), on kv_b_proj
// split once at load instead of dequantized every step:
//   absorb:  q_abs[t, h] = [W_UK_h^T q_nope[t, h] | q_pe[t, h]]    (uk:   W_UK_h per head)
//   expand:  out[t, h]   = W_UV_h o_lat[t, h]                        (uv_t: W_UV_h^T per head)
// W_UK_h / W_UV_h are the qk_nope / v_head_dim rows of head h in kv_b_proj
// [H * (qk_nope + v_head_dim), kv_lora_rank], kept in fp32. Both products combine the rows of
// a matrix (kernels/rows_combination.h: x[t, r] * w[r, :] summed over r with one fma each, in
// row order), heads split over the pool; each head's matrix is read front to back, and a
// token's result does not depend on the batch.
#include <cstdint>

#include "core/tensor_view.h"
#include "core/thread_pool.h"
#include "io/model_config.h"

namespace densa {

// Fills uk [H * qk_nope, kv_lora_rank] (W_UK_h) and uv_t [H * kv_lora_rank, v_head_dim]
// (W_UV_h^T) in fp32 from kv_b, dequantized with the reference dequantizer (the values a step
// used to dequantize).
void mla_split_kv_b(const WeightView& kv_b, const MlaConfig& m, int num_heads, float* uk, float* uv_t);

// An fp32 WeightView of `rows` x `cols` at `data`.
WeightView mla_f32_view(const float* data, int64_t rows, int64_t cols);

// q [n, H, qk_nope + qk_rope] -> q_abs [n, H, kv_lora_rank + qk_rope].
void mla_absorb_queries(const MlaConfig& m, const WeightView& uk, int num_heads, const float* q, int64_t n,
                        float* q_abs, ThreadPool* pool);
// o_lat [n, H, kv_lora_rank] -> out [n, H, v_head_dim].
void mla_expand_values(const MlaConfig& m, const WeightView& uv_t, int num_heads, const float* o_lat, int64_t n,
                       float* out, ThreadPool* pool);

}  // namespace densa
