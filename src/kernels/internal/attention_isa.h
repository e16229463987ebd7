#pragma once
// Internals of kernels/attention.h: the per-ISA tile primitives the one attention loop calls,
// and a test hook that forces an ISA level.
//
// The loop (attention.cpp) walks a sequence's positions in tiles of kAttnTile positions
// aligned on absolute position (tile k = positions 16k .. 16k+15), whatever the page size, so
// paged and contiguous caches give bit-identical results. Per tile it decodes the K rows into
// an fp32 tile buffer once and serves every query head that shares the kv head; the V rows are
// decoded in registers as they are accumulated.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "core/worker_scratch.h"
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
  // s[g * kAttnTile + t] = dot(q[g], k[t]) * kscale[t], for g < group, t < num_rows; each
  // head's scores have the bits they have with group = 1 (however an ISA groups the heads).
  void (*scores)(const float* q, int group, const float* k, int num_rows, int head_dim,
                 const float* kscale, float* s);
  // The online-softmax step of one tile, for each g < group: m[g] = max(m[g], s[g][t < n]);
  // when m[g] grows, l[g] and acc[g][0 .. head_dim) are multiplied by exp(old - new) (0 on
  // the first tile, where m[g] = -inf); then s[g][t] = exp(s[g][t] - m[g]) is added into l[g]
  // and stored times vscale[t] (the weight of value row t). Entries t >= n are left alone.
  void (*softmax_update)(float* s, int group, int n, int head_dim, const float* vscale, float* m,
                         float* l, float* acc);
  // acc[g] += sum_t w[g * kAttnTile + t] * v[t]   (t in order 0 .. num_rows-1 per lane), v
  // already decoded to fp32 [num_rows][head_dim].
  void (*accumulate)(const float* w, int group, const float* v, int num_rows, int head_dim,
                     float* acc);
  // The same sum over raw cache rows (decoded on the fly as decode_rows would, without the
  // round trip through a tile buffer). Same order per lane, so the same result.
  void (*accumulate_rows)(const float* w, int group, const uint8_t* const* rows, int num_rows,
                          int head_dim, DType dtype, float* acc);
  float fp8_unit;
};

extern const AttnTileOps kScalarOps;
// Requires cpu_isa_hardware() >= kAvx2 and head_dim % 8 == 0 (attention/attention_avx2.cpp).
extern const AttnTileOps kAvx2Ops;
// Requires cpu_isa_hardware() >= kAvx512Bf16 and head_dim % 16 == 0.
extern const AttnTileOps kAvx512Ops;

// The implementations paged_attention() chooses from. kAmx (attention/attention_amx.cpp) takes BF16 and
// FP8 layouts with head_dim % 32 == 0 (amx_attention_supports) and hands any other layout to
// kAvx512; kAvx512 hands head_dim % 16 != 0 to kScalar, and kAvx2 hands head_dim % 8 != 0 to
// kScalar. The paths give different bits, so a process uses one per layout: kAmx where
// cpu_use_amx(), else kAvx512 or kAvx2 as cpu_isa() allows.
enum class AttnPath : uint8_t { kScalar, kAvx2, kAvx512, kAmx };
std::string_view attn_path_name(AttnPath path);
// Whether this machine can run `path`; every such path (tests run each); the one
// paged_attention() uses.
bool attention_path_available(AttnPath path);
std::vector<AttnPath> attention_paths_available();
AttnPath attention_default_path();

bool amx_attention_supports(const KvLayout& layout);
// Test hook: the most bytes per thread an AMX item of several passes decodes up front (8 MiB by
// default; 0: each pass decodes its rows). Returns the previous limit.
int64_t amx_attention_set_kept_limit(int64_t bytes);
// One work item of the AMX path (see attend_run in attention.cpp for the arguments); its
// buffers come from ws (the running thread's scratch).
void attend_run_amx(const KvView& kv, int layer, int seq, int32_t pos0, int nq, int kvh,
                    const float* q, int64_t q_stride, int group, float scale, float* out, WorkerScratch& ws);

// paged_attention() on an explicit path, which must be available (attention_path_available).
void paged_attention_with_path(AttnPath path, const KvView& kv, int layer, const float* q,
                               int num_heads, float scale, std::span<const int32_t> seq_idx,
                               std::span<const int32_t> positions, float* out, ThreadPool* pool);

}  // namespace densa::attention_internal
