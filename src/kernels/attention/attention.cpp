#include "kernels/attention.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/internal/attention_isa.h"
#include "kernels/internal/scratch_slots.h"
#include "quant/fp8.h"

namespace densa {

namespace attention_internal {
namespace {

// ---- Portable tile primitives (the simple path; also the fallback for odd head_dim). ----

void decode_rows_scalar(const uint8_t* const* rows, int num_rows, int head_dim, DType dtype,
                        float* dst) {
  for (int t = 0; t < num_rows; ++t) {
    float* out = dst + static_cast<int64_t>(t) * head_dim;
    if (dtype == DType::kF32) {
      std::memcpy(out, rows[t], static_cast<size_t>(head_dim) * 4);
    } else if (dtype == DType::kBF16) {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(rows[t]);
      for (int d = 0; d < head_dim; ++d) out[d] = bf16_to_f32(s[d]);
    } else {
      const float* table = fp8_e4m3_decode_table();
      for (int d = 0; d < head_dim; ++d) out[d] = table[rows[t][d]];
    }
  }
}

void scores_scalar(const float* q, int group, const float* k, int num_rows, int head_dim,
                   const float* kscale, float* s) {
  for (int g = 0; g < group; ++g) {
    const float* qg = q + static_cast<int64_t>(g) * head_dim;
    for (int t = 0; t < num_rows; ++t) {
      const float* kt = k + static_cast<int64_t>(t) * head_dim;
      float dot = 0.0f;
      for (int d = 0; d < head_dim; ++d) dot += qg[d] * kt[d];
      s[g * kAttnTile + t] = dot * kscale[t];
    }
  }
}

void softmax_update_scalar(float* s, int group, int n, int head_dim, const float* vscale, float* m,
                           float* l, float* acc) {
  for (int g = 0; g < group; ++g) {
    float* sg = s + g * kAttnTile;
    float mx = m[g];
    for (int t = 0; t < n; ++t) mx = std::max(mx, sg[t]);
    if (mx > m[g]) {
      const float c = std::exp(m[g] - mx);  // 0 on the first tile
      l[g] *= c;
      for (int d = 0; d < head_dim; ++d) acc[g * head_dim + d] *= c;
      m[g] = mx;
    }
    float sum = 0.0f;
    for (int t = 0; t < n; ++t) {
      const float p = std::exp(sg[t] - mx);
      sum += p;
      sg[t] = p * vscale[t];
    }
    l[g] += sum;
  }
}

void accumulate_scalar(const float* w, int group, const float* v, int num_rows, int head_dim,
                       float* acc) {
  for (int g = 0; g < group; ++g) {
    float* ag = acc + static_cast<int64_t>(g) * head_dim;
    for (int t = 0; t < num_rows; ++t) {
      const float wt = w[g * kAttnTile + t];
      const float* vt = v + static_cast<int64_t>(t) * head_dim;
      for (int d = 0; d < head_dim; ++d) ag[d] += wt * vt[d];
    }
  }
}

void accumulate_rows_scalar(const float* w, int group, const uint8_t* const* rows, int num_rows,
                            int head_dim, DType dtype, float* acc) {
  alignas(64) float v[kAttnTile * kMaxHeadDim];
  decode_rows_scalar(rows, num_rows, head_dim, dtype, v);
  accumulate_scalar(w, group, v, num_rows, head_dim, acc);
}

// Fails loudly on a view whose dtype and scale mode disagree; in particular an FP8 view in
// static mode without scales (never a silent scale of 1.0).
void check_view(const KvView& kv) {
  const KvLayout& L = kv.layout;
  if (L.dtype == DType::kF32 || L.dtype == DType::kBF16) {
    CHECK(L.scale_mode == KvScaleMode::kNone) << "KV " << dtype_name(L.dtype) << " takes no scales";
  } else {
    CHECK(L.dtype == DType::kFP8E4M3) << "unsupported KV dtype " << dtype_name(L.dtype);
    CHECK(L.scale_mode != KvScaleMode::kNone) << "fp8 KV needs static or dynamic scales";
    CHECK(L.scale_mode != KvScaleMode::kStatic || kv.static_scales != nullptr)
        << "fp8 KV in static scale mode without scales";
  }
  CHECK(L.head_dim > 0 && L.head_dim <= kMaxHeadDim) << "head_dim " << L.head_dim;
}

inline float load_f32(const uint8_t* p) {
  float x;
  std::memcpy(&x, p, 4);
  return x;
}

// A run's scratch, in its thread's WorkerScratch: its queries' scaled q, accumulators and
// softmax state.
struct RunScratch {
  float* qs;
  float* acc;
  float* s;
  float* m;
  float* l;
  RunScratch(WorkerScratch& ws, int nq, int G, int hd) {
    const size_t gh = static_cast<size_t>(nq) * G * hd;
    const size_t gs = static_cast<size_t>(nq) * G;
    qs = ws.array<float>(kernels_internal::kSlotAttnQs, gh);
    acc = ws.array<float>(kernels_internal::kSlotAttnAcc, gh);
    m = ws.array<float>(kernels_internal::kSlotAttnMax, gs);
    l = ws.array<float>(kernels_internal::kSlotAttnSum, gs);
    s = ws.array<float>(kernels_internal::kSlotAttnScores, gs * kAttnTile);
  }
};

// One work item: the `group` query heads that read kv head `kvh`, for `nq` tokens of sequence
// `seq` at the consecutive positions pos0 .. pos0 + nq - 1 (a run of a prefill chunk; one token
// in decode). Query j's heads are q + j * q_stride [group][head_dim], its output goes to
// out + j * q_stride. Online softmax over tiles of kAttnTile positions aligned on absolute
// position. Each tile's K (and, for nq > 1, V) rows are decoded once and serve every query of
// the run that reaches the tile; query j sees exactly the values and the operations it would
// see alone (accumulate on decoded V == accumulate_rows, bit for bit), so its result depends on
// nothing but its own inputs, whatever run it was batched in. Scratch comes from ws.
void attend_run(const AttnTileOps& ops, const KvView& kv, int layer, int seq, int32_t pos0, int nq,
                int kvh, const float* q, int64_t q_stride, int group, float scale, float* out, WorkerScratch& ws) {
  const KvLayout& L = kv.layout;
  const int hd = L.head_dim;
  const int32_t last = pos0 + nq - 1;
  const bool fp8 = L.dtype == DType::kFP8E4M3;
  const bool dynamic = L.scale_mode == KvScaleMode::kDynamic;
  float static_k = 1.0f, static_v = 1.0f;
  if (fp8 && !dynamic) {
    static_k = kv.static_scales[(layer * 2 + 0) * L.num_kv_heads + kvh] * ops.fp8_unit;
    static_v = kv.static_scales[(layer * 2 + 1) * L.num_kv_heads + kvh] * ops.fp8_unit;
  }
  const RunScratch scratch(ws, nq, std::min(group, kMaxGroupChunk), hd);
  alignas(64) float kbuf[kAttnTile * kMaxHeadDim];
  float* vbuf = nq > 1 ? ws.array<float>(kernels_internal::kSlotAttnV, static_cast<size_t>(kAttnTile) * hd) : nullptr;
  float ks[kAttnTile], vs[kAttnTile];
  const int32_t* pages = kv.block_table.data() + kv.block_offsets[seq];
  const int64_t row_bytes = hd * L.elem_bytes();
  const int64_t k_off = L.data_offset(layer, 0, kvh, 0), v_off = L.data_offset(layer, 1, kvh, 0);
  const int64_t ks_off = dynamic ? L.scale_offset(layer, 0, kvh, 0) : 0;
  const int64_t vs_off = dynamic ? L.scale_offset(layer, 1, kvh, 0) : 0;
  const uint8_t* krows[kAttnTile];
  const uint8_t* vrows[kAttnTile];
  // Each tile's K and V rows are a short stream in a page far from the previous tile's, which
  // the hardware prefetcher does not see coming. Ask for tile `start` while the one before it
  // is computed, into L2 (prefetcht2: measured faster than into L1 with BM_PathsInterleaved in
  // attention_bench). always_inline: GCC takes a function whose only effects are prefetches for
  // one without side effects and deletes the calls to it (tests/kernels/prefetch_codegen_test.cpp
  // checks the binary keeps them).
  auto prefetch_tile = [&](int32_t start) __attribute__((always_inline)) {
    if (start > last) return;
    const int32_t end = std::min<int32_t>(start + kAttnTile, last + 1);
    for (int32_t p0 = start; p0 < end;) {
      const int slot0 = p0 % L.page_size;
      const int32_t n = std::min<int32_t>(end - p0, L.page_size - slot0);
      const uint8_t* page = kv.page_ptr(pages[p0 / L.page_size]);
      const int64_t bytes = n * row_bytes;
      for (int64_t b = 0; b < bytes; b += 64) {
        __builtin_prefetch(page + k_off + slot0 * row_bytes + b, 0, 1);
        __builtin_prefetch(page + v_off + slot0 * row_bytes + b, 0, 1);
      }
      if (dynamic) {
        __builtin_prefetch(page + ks_off + slot0 * 4, 0, 1);
        __builtin_prefetch(page + vs_off + slot0 * 4, 0, 1);
      }
      p0 += n;
    }
  };

  for (int g0 = 0; g0 < group; g0 += kMaxGroupChunk) {
    const int G = std::min(kMaxGroupChunk, group - g0);
    const int64_t gh = static_cast<int64_t>(G) * hd;
    for (int j = 0; j < nq; ++j) {
      float* qs = scratch.qs + j * gh;
      float* acc = scratch.acc + j * gh;
      const float* qj = q + j * q_stride;
      for (int g = 0; g < G; ++g) {
        for (int d = 0; d < hd; ++d) {
          qs[g * hd + d] = qj[(g0 + g) * hd + d] * scale;
          acc[g * hd + d] = 0.0f;
        }
        scratch.m[j * G + g] = -std::numeric_limits<float>::infinity();
        scratch.l[j * G + g] = 0.0f;
      }
    }
    prefetch_tile(0);
    for (int32_t start = 0; start <= last; start += kAttnTile) {
      const int T = std::min<int32_t>(kAttnTile, last + 1 - start);
      prefetch_tile(start + kAttnTile);
      // Row addresses: one division per tile, then walk slots and pages.
      int32_t page_idx = start / L.page_size;
      int slot = start % L.page_size;
      const uint8_t* page = kv.page_ptr(pages[page_idx]);
      for (int t = 0; t < T; ++t) {
        krows[t] = page + k_off + slot * row_bytes;
        vrows[t] = page + v_off + slot * row_bytes;
        if (dynamic) {
          ks[t] = load_f32(page + ks_off + slot * 4) * ops.fp8_unit;
          vs[t] = load_f32(page + vs_off + slot * 4) * ops.fp8_unit;
        } else {
          ks[t] = static_k;
          vs[t] = static_v;
        }
        if (++slot == L.page_size && t + 1 < T) {
          slot = 0;
          page = kv.page_ptr(pages[++page_idx]);
        }
      }
      ops.decode_rows(krows, T, hd, L.dtype, kbuf);
      if (nq > 1) ops.decode_rows(vrows, T, hd, L.dtype, vbuf);
      // Queries before `start` are done with this tile; query j reads rows up to pos0 + j.
      for (int j = std::max(0, start - pos0); j < nq; ++j) {
        const int Tj = std::min<int32_t>(T, pos0 + j + 1 - start);
        float* acc = scratch.acc + j * gh;
        float* sj = scratch.s + static_cast<int64_t>(j) * G * kAttnTile;
        ops.scores(scratch.qs + j * gh, G, kbuf, Tj, hd, ks, sj);
        ops.softmax_update(sj, G, Tj, hd, vs, scratch.m + j * G, scratch.l + j * G, acc);
        if (nq > 1) {
          ops.accumulate(sj, G, vbuf, Tj, hd, acc);
        } else {
          ops.accumulate_rows(sj, G, vrows, Tj, hd, L.dtype, acc);
        }
      }
    }
    for (int j = 0; j < nq; ++j) {
      const float* acc = scratch.acc + j * gh;
      float* oj = out + j * q_stride;
      for (int g = 0; g < G; ++g) {
        const float inv = 1.0f / scratch.l[j * G + g];
        for (int d = 0; d < hd; ++d) oj[(g0 + g) * hd + d] = acc[g * hd + d] * inv;
      }
    }
  }
}

}  // namespace

const AttnTileOps kScalarOps{decode_rows_scalar, scores_scalar,      softmax_update_scalar,
                             accumulate_scalar,  accumulate_rows_scalar, 1.0f};

std::string_view attn_path_name(AttnPath path) {
  switch (path) {
    case AttnPath::kScalar: return "scalar";
    case AttnPath::kAvx2: return "avx2";
    case AttnPath::kAvx512: return "avx512";
    case AttnPath::kAmx: return "amx";
  }
  return "?";
}

bool attention_path_available(AttnPath path) {
  switch (path) {
    case AttnPath::kScalar: return true;
    case AttnPath::kAvx2: return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx2);
    case AttnPath::kAvx512: return cpu_isa_hardware() == CpuIsa::kAvx512Bf16;
    case AttnPath::kAmx: return cpu_isa_hardware() == CpuIsa::kAvx512Bf16 && cpu_has_amx_bf16();
  }
  return false;
}

std::vector<AttnPath> attention_paths_available() {
  std::vector<AttnPath> v;
  for (AttnPath p : {AttnPath::kScalar, AttnPath::kAvx2, AttnPath::kAvx512, AttnPath::kAmx})
    if (attention_path_available(p)) v.push_back(p);
  return v;
}

AttnPath attention_default_path() {
  if (cpu_isa() == CpuIsa::kAvx2) return AttnPath::kAvx2;
  if (cpu_isa() != CpuIsa::kAvx512Bf16) return AttnPath::kScalar;
  return cpu_use_amx() ? AttnPath::kAmx : AttnPath::kAvx512;
}

void paged_attention_with_path(AttnPath path, const KvView& kv, int layer, const float* q,
                               int num_heads, float scale, std::span<const int32_t> seq_idx,
                               std::span<const int32_t> positions, float* out, ThreadPool* pool) {
  check_view(kv);
  const KvLayout& L = kv.layout;
  CHECK(attention_path_available(path)) << "attention path " << attn_path_name(path);
  CHECK(num_heads % L.num_kv_heads == 0) << num_heads << " heads over " << L.num_kv_heads;
  if (path == AttnPath::kAmx && !amx_attention_supports(L)) path = AttnPath::kAvx512;
  if (path == AttnPath::kAvx512 && L.head_dim % 16 != 0) path = AttnPath::kScalar;
  if (path == AttnPath::kAvx2 && L.head_dim % 8 != 0) path = AttnPath::kScalar;
  const bool amx = path == AttnPath::kAmx;
  const AttnTileOps& ops = path == AttnPath::kAvx512 ? kAvx512Ops : path == AttnPath::kAvx2 ? kAvx2Ops : kScalarOps;
  const int group = num_heads / L.num_kv_heads;
  const int hd = L.head_dim;
  // Runs: up to kMaxRun consecutive tokens of one sequence at consecutive positions (a prefill
  // chunk), which share each decoded K/V tile. One work item per (run, kv head); a token's
  // result does not depend on its run (see attend_run), so the batch stays invariant.
  constexpr int kMaxRun = 16;
  WorkerScratch own;  // the scratch without a pool (kernels_internal::scratch_of)
  // The runs' first tokens, then positions.size(): in the calling thread's scratch, read by
  // every worker.
  int64_t* run_begin = kernels_internal::scratch_of(pool, 0, own).array<int64_t>(kernels_internal::kSlotAttnRuns, positions.size() + 1);
  int64_t num_runs = 0;
  for (size_t i = 0; i < positions.size(); ++i) {
    const bool extends = num_runs > 0 && seq_idx[i] == seq_idx[i - 1] && positions[i] == positions[i - 1] + 1 &&
                         static_cast<int64_t>(i) - run_begin[num_runs - 1] < kMaxRun;
    if (!extends) run_begin[num_runs++] = static_cast<int64_t>(i);
  }
  run_begin[num_runs] = static_cast<int64_t>(positions.size());
  const int64_t items = num_runs * L.num_kv_heads;
  const int64_t q_stride = static_cast<int64_t>(num_heads) * hd;
  // Items are claimed last run first: a prefill chunk's later runs read more of the context, so
  // the cheapest items come last and the threads finish close together.
  auto run = [&](int worker, int64_t begin, int64_t end) {
    WorkerScratch& ws = kernels_internal::scratch_of(pool, worker, own);
    for (int64_t claim = begin; claim < end; ++claim) {
      const int64_t item = items - 1 - claim;
      const int64_t r = item / L.num_kv_heads;
      const int kvh = static_cast<int>(item % L.num_kv_heads);
      const int64_t i = run_begin[r];
      const int nq = static_cast<int>(run_begin[r + 1] - i);
      const int64_t off = i * q_stride + static_cast<int64_t>(kvh) * group * hd;
      if (amx) {
        attend_run_amx(kv, layer, seq_idx[i], positions[i], nq, kvh, q + off, q_stride, group, scale, out + off, ws);
      } else {
        attend_run(ops, kv, layer, seq_idx[i], positions[i], nq, kvh, q + off, q_stride, group, scale,
                   out + off, ws);
      }
    }
  };
  if (pool != nullptr && items > 1) {
    pool->parallel_for_dynamic_on_workers(items, run);
  } else {
    run(0, 0, items);
  }
}

}  // namespace attention_internal

namespace {

// FP8 rows: static mode uses the (layer, k|v, head) scale; dynamic mode uses amax / 448 of
// the row and stores it beside the page. A row whose amax / 448 is not a positive normal
// float (all zeros, or values below ~5e-36) is stored as zeros with scale 0.
void store_row(const KvView& kv, int layer, int which, int seq, int head, int32_t pos,
               const float* in) {
  const KvLayout& L = kv.layout;
  uint8_t* page = kv.page_ptr(kv.page_of(seq, pos));
  const int slot = pos % L.page_size;
  uint8_t* dst = page + L.data_offset(layer, which, head, slot);
  const size_t hd = static_cast<size_t>(L.head_dim);
  if (L.dtype == DType::kF32) {
    std::memcpy(dst, in, hd * 4);
    return;
  }
  if (L.dtype == DType::kBF16) {
    uint16_t* d16 = reinterpret_cast<uint16_t*>(dst);
    for (size_t d = 0; d < hd; ++d) d16[d] = f32_to_bf16(in[d]);
    return;
  }
  float s;
  if (L.scale_mode == KvScaleMode::kStatic) {
    s = kv.static_scales[(layer * 2 + which) * L.num_kv_heads + head];
  } else {
    float amax = 0.0f;
    for (size_t d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(in[d]));
    s = amax / kFp8E4M3Max;
    if (!(s >= FLT_MIN)) s = 0.0f;
    std::memcpy(page + L.scale_offset(layer, which, head, slot), &s, 4);
  }
  if (s > 0.0f) {
    fp8_e4m3_encode(std::span<const float>(in, hd), s, std::span<uint8_t>(dst, hd));
  } else {
    std::memset(dst, 0, hd);
  }
}

}  // namespace

void kv_store(const KvView& kv, int layer, const float* k, const float* v,
              std::span<const int32_t> seq_idx, std::span<const int32_t> positions, ThreadPool* pool) {
  attention_internal::check_view(kv);
  const KvLayout& L = kv.layout;
  const int64_t row = static_cast<int64_t>(L.num_kv_heads) * L.head_dim;
  const int64_t n = static_cast<int64_t>(positions.size());
  auto store = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      for (int h = 0; h < L.num_kv_heads; ++h) {
        store_row(kv, layer, 0, seq_idx[i], h, positions[i], k + i * row + h * L.head_dim);
        store_row(kv, layer, 1, seq_idx[i], h, positions[i], v + i * row + h * L.head_dim);
      }
    }
  };
  // Tokens in ascending (sequence, position) order write distinct slots, so they can be split
  // over the pool; any other order (two tokens on one slot, where the later must win) stays on
  // this thread in order.
  bool ascending = true;
  for (int64_t i = 1; i < n && ascending; ++i) {
    ascending = seq_idx[i] > seq_idx[i - 1] || (seq_idx[i] == seq_idx[i - 1] && positions[i] > positions[i - 1]);
  }
  if (!ascending) return store(0, n);
  parallel_for_elems(pool, n, 2 * row, store);
}

bool paged_attention_prefetch(const KvView& kv, int layer, std::span<const int32_t> seq_idx,
                              std::span<const int32_t> positions, int64_t max_bytes) {
  attention_internal::check_view(kv);
  const KvLayout& L = kv.layout;
  const int64_t row_bytes = static_cast<int64_t>(L.head_dim) * L.elem_bytes();
  const bool dynamic = L.dtype == DType::kFP8E4M3 && L.scale_mode == KvScaleMode::kDynamic;
  // The tokens of one sequence come together (a decode token, or a prefill chunk in order):
  // attention reads positions 0 .. the last one of each such group.
  auto for_each_sequence = [&](auto&& fn) {
    for (size_t i = 0; i < positions.size();) {
      size_t j = i;
      int32_t last = positions[i];
      while (j + 1 < positions.size() && seq_idx[j + 1] == seq_idx[i]) last = std::max(last, positions[++j]);
      fn(seq_idx[i], last);
      i = j + 1;
    }
  };
  int64_t bytes = 0;
  for_each_sequence([&](int seq, int32_t last) {
    (void)seq;
    bytes += (static_cast<int64_t>(last) + 1) * L.num_kv_heads * 2 * (row_bytes + (dynamic ? 4 : 0));
  });
  if (bytes > max_bytes) return false;
  for_each_sequence([&](int seq, int32_t last) {
    const int32_t* pages = kv.block_table.data() + kv.block_offsets[seq];
    for (int32_t p0 = 0; p0 <= last; p0 += L.page_size) {
      const uint8_t* page = kv.page_ptr(pages[p0 / L.page_size]);
      const int32_t n = std::min<int32_t>(L.page_size, last + 1 - p0);
      for (int h = 0; h < L.num_kv_heads; ++h) {
        for (int which = 0; which < 2; ++which) {
          const uint8_t* rows = page + L.data_offset(layer, which, h, 0);
          for (int64_t b = 0; b < n * row_bytes; b += 64) __builtin_prefetch(rows + b, 0, 2);
          if (dynamic) __builtin_prefetch(page + L.scale_offset(layer, which, h, 0), 0, 2);
        }
      }
    }
  });
  return true;
}

void paged_attention(const KvView& kv, int layer, const float* q, int num_heads, float scale,
                     std::span<const int32_t> seq_idx, std::span<const int32_t> positions,
                     float* out, ThreadPool* pool) {
  attention_internal::paged_attention_with_path(attention_internal::attention_default_path(), kv, layer, q,
                                                num_heads, scale, seq_idx, positions, out, pool);
}

}  // namespace densa
