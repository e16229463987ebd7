#pragma once
// The absorbed products of multi-head latent attention (model/arch_deepseek_v3.h), on kv_b_proj
// split once at load instead of dequantized every step:
//   absorb:  q_abs[t, h] = [W_UK_h^T q_nope[t, h] | q_pe[t, h]]    (uk: W_UK_h per head)
//   expand:  out[t, h]   = W_UV_h o_lat[t, h]                        (uv: W_UV_h per head)
// W_UK_h / W_UV_h are the qk_nope / v_head_dim rows of head h in kv_b_proj
// [H * (qk_nope + v_head_dim), kv_lora_rank], both in fp32. Absorb combines W_UK_h's rows
// (kernels/rows_combination.h: long contiguous rows, no horizontal sums), heads split over the
// pool; expand is one matmul per head (kernels/matmul.h), all heads in one pass. Both kernels
// are batch invariant, so the products are.
#include <cstdint>
#include <vector>

#include "core/tensor_view.h"
#include "core/thread_pool.h"
#include "io/model_config.h"
#include "kernels/matmul.h"

namespace densa {

// Per-forward buffers of the expand product (ForwardScratch holds one).
struct MlaScratch {
  std::vector<float> in, out;
  std::vector<MatmulJob> jobs;
};

// Fills uk [H * qk_nope, kv_lora_rank] and uv [H * v_head_dim, kv_lora_rank] (fp32) from kv_b,
// dequantized with the reference dequantizer (the values a step used to dequantize).
void mla_split_kv_b(const WeightView& kv_b, const MlaConfig& m, int num_heads, float* uk, float* uv);

// An fp32 WeightView of `rows` x `cols` at `data`.
WeightView mla_f32_view(const float* data, int64_t rows, int64_t cols);

// q [n, H, qk_nope + qk_rope] -> q_abs [n, H, kv_lora_rank + qk_rope].
void mla_absorb_queries(const MlaConfig& m, const WeightView& uk, int num_heads, const float* q, int64_t n,
                        float* q_abs, ThreadPool* pool);
// o_lat [n, H, kv_lora_rank] -> out [n, H, v_head_dim].
void mla_expand_values(const MlaConfig& m, const WeightView& uv, int num_heads, const float* o_lat, int64_t n,
                       float* out, MlaScratch& s, ThreadPool* pool);

}  // namespace densa
