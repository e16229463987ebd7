#pragma once
// Naive oracle for kernels/attention.h: contiguous fp32 K/V, double accumulation, plus the
// values an FP8 KV slot holds after kv_store (the FP8 attention oracle runs on those).
#include <cstdint>

namespace densa::ref {

// q: [num_heads*head_dim] for one token at position pos; k, v: [pos+1][num_kv_heads*head_dim].
void attention_one(const float* q, const float* k, const float* v, int32_t pos, int num_heads,
                   int num_kv_heads, int head_dim, float scale, float* out);

// Dynamic FP8 KV scale of one row: max |x| / 448, or 0 when that is not a positive normal float.
float kv_fp8_dynamic_scale(const float* row, int head_dim);
// out[d] = fp8_e4m3(row[d] / scale) * scale (0 when scale == 0): what attention reads back.
void kv_fp8_round_trip(const float* row, int head_dim, float scale, float* out);

}  // namespace densa::ref
