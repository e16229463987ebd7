#pragma once
// Internals of kernels/dsa_attention.h: the lightning indexer's scoring per ISA level, and the
// test hook that picks one.
//
// Arithmetic contract (every level gives the same bits). For a stored position p with FP8 key
// codes c_p and scale s_p, and indexer head h with query q_h and weight w_h:
//   dot  = fma chain over d in order: dot = fma(q_h[d], decode(c_p[d]), dot), from 0
//   v    = (dot * s_p) * scale
//   r    = v > 0 ? v : 0          (NaN gives 0)
//   s(p) = fma chain over h in order: total = fma(w_h, r_h, total), from 0
// decode() is the exact e4m3 value (kernels read it off the bits, the scalar level off
// quant/fp8.h's table). The key's scale is applied once to the dot product, not per element.
#include <cstdint>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/kv_view.h"

namespace densa::dsa_internal {

struct IndexQuery {
  const float* q;        // [num_heads, index_dim]
  const float* weights;  // [num_heads]
  int num_heads;
  float scale;
};

// The scores of positions [first, last] of sequence seq into out[first .. last].
void score_range_scalar(const KvView& kv, int layer, const IndexQuery& query, int seq, int32_t first, int32_t last,
                        float* out);
void score_range_avx2(const KvView& kv, int layer, const IndexQuery& query, int seq, int32_t first, int32_t last,
                      float* out);
void score_range_avx512(const KvView& kv, int layer, const IndexQuery& query, int seq, int32_t first, int32_t last,
                        float* out);

// dsa_index_scores at a given ISA level (<= cpu_isa_hardware()).
void index_scores_with_isa(CpuIsa isa, const KvView& kv, int layer, const IndexQuery& query, int seq, int32_t pos,
                           float* out, ThreadPool* pool);

}  // namespace densa::dsa_internal
