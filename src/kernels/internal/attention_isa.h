#pragma once
// Internals of kernels/attention.h: the per-ISA tile primitives the one attention loop calls,
// and a test hook that forces an ISA level.
//
// The loop (attention.cpp) walks a sequence's positions in tiles of kAttnTile positions
// aligned on absolute position (tile k = positions 16k .. 16k+15), whatever the page size, so
// paged and contiguous caches give bit-identical results. Per tile it decodes the K rows and
// the V rows into fp32 tile buffers once, then serves every query head that shares the kv head.
#include <cstdint>
#include <span>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/kv_view.h"

namespace densa::attention_internal {

inline constexpr int kAttnTile = 16;      // positions per tile
inline constexpr int kMaxHeadDim = 512;
inline constexpr int kMaxGroupChunk = 8;  // query heads served per pass over the kv head

struct AttnTileOps {
  // dst[t][d] = raw value of element d of rows[t] (t < num_rows); fp8 raw values are the code
  // values divided by fp8_unit (the caller multiplies fp8_unit into the row scale).
  void (*decode_rows)(const uint8_t* const* rows, int num_rows, int head_dim, DType dtype,
                      float* dst);
  // s[g * kAttnTile + t] = dot(q[g], k[t]) * kscale[t], for g < group, t < num_rows.
  void (*scores)(const float* q, int group, const float* k, int num_rows, int head_dim,
                 const float* kscale, float* s);
  // p[i] = exp(p[i] - m) for i < n.
  void (*exp_shift)(float* p, int n, float m);
  // acc[g] += sum_t w[g * kAttnTile + t] * v[t]   (t in order 0 .. num_rows-1 per lane).
  void (*accumulate)(const float* w, int group, const float* v, int num_rows, int head_dim,
                     float* acc);
  float fp8_unit;
};

extern const AttnTileOps kScalarOps;
// Requires cpu_isa_hardware() >= kAvx512Bf16 and head_dim % 16 == 0.
extern const AttnTileOps kAvx512Ops;

// paged_attention() with an explicit ISA level; isa must not exceed cpu_isa_hardware().
void paged_attention_with_isa(CpuIsa isa, const KvView& kv, int layer, const float* q,
                              int num_heads, float scale, std::span<const int32_t> seq_idx,
                              std::span<const int32_t> positions, float* out, ThreadPool* pool);

}  // namespace densa::attention_internal
