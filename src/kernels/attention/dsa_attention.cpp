#include "kernels/dsa_attention.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/internal/dsa_index_isa.h"
#include "kernels/mla_attention.h"
#include "quant/fp8.h"

namespace densa {
namespace {

inline float load_f32(const uint8_t* p) {
  float x;
  std::memcpy(&x, p, 4);
  return x;
}

void check_index_view(const KvView& kv) {
  CHECK(kv.layout.is_latent() && kv.layout.index_dim > 0) << "DSA needs a latent KV layout with index keys";
}

using dsa_internal::IndexQuery;

}  // namespace

namespace dsa_internal {

void score_range_scalar(const KvView& kv, int layer, const IndexQuery& query, int seq, int32_t first, int32_t last,
                        float* out) {
  const KvLayout& L = kv.layout;
  const int D = L.index_dim;
  const float* table = fp8_e4m3_decode_table();
  for (int32_t p = first; p <= last; ++p) {
    const uint8_t* page = kv.page_ptr(kv.page_of(seq, p));
    const int slot = p % L.page_size;
    const float key_scale = load_f32(page + L.index_scale_offset(layer, slot));
    const uint8_t* codes = page + L.index_key_offset(layer, slot);
    float total = 0.0f;
    for (int h = 0; h < query.num_heads; ++h) {
      const float* qh = query.q + static_cast<int64_t>(h) * D;
      float dot = 0.0f;
      for (int d = 0; d < D; ++d) dot = std::fma(qh[d], table[codes[d]], dot);
      const float v = (dot * key_scale) * query.scale;
      total = std::fma(query.weights[h], v > 0.0f ? v : 0.0f, total);
    }
    out[p] = total;
  }
}

void index_scores_with_isa(CpuIsa isa, const KvView& kv, int layer, const IndexQuery& query, int seq, int32_t pos,
                           float* out, ThreadPool* pool) {
  CHECK(static_cast<int>(isa) <= static_cast<int>(cpu_isa_hardware())) << "dsa_index_scores: isa " << cpu_isa_name(isa);
  check_index_view(kv);
  auto range = [&](int32_t first, int32_t last) {
    if (isa == CpuIsa::kAvx512Bf16) return score_range_avx512(kv, layer, query, seq, first, last, out);
    if (isa == CpuIsa::kAvx2) return score_range_avx2(kv, layer, query, seq, first, last, out);
    score_range_scalar(kv, layer, query, seq, first, last, out);
  };
  // Positions in blocks of this many per pool job: enough work per job to pay for the hand-off.
  // Every position's score is the same arithmetic whatever block it falls in.
  constexpr int64_t kBlock = 1024;
  const int64_t total = static_cast<int64_t>(pos) + 1;
  if (pool != nullptr && pool->num_threads() > 1 && total > kBlock) {
    pool->parallel_for((total + kBlock - 1) / kBlock, [&](int64_t b, int64_t e) {
      for (int64_t blk = b; blk < e; ++blk) {
        range(static_cast<int32_t>(blk * kBlock), static_cast<int32_t>(std::min<int64_t>(total, (blk + 1) * kBlock)) - 1);
      }
    });
    return;
  }
  range(0, pos);
}

}  // namespace dsa_internal

void dsa_index_store(const KvView& kv, int layer, const float* keys, std::span<const int32_t> seq_idx,
                     std::span<const int32_t> positions) {
  check_index_view(kv);
  const KvLayout& L = kv.layout;
  const int D = L.index_dim;
  for (size_t t = 0; t < positions.size(); ++t) {
    uint8_t* page = kv.page_ptr(kv.page_of(seq_idx[t], positions[t]));
    const int slot = positions[t] % L.page_size;
    const float* in = keys + t * D;
    float amax = 0.0f;
    for (int d = 0; d < D; ++d) amax = std::max(amax, std::fabs(in[d]));
    float sc = amax / kFp8E4M3Max;
    if (!(sc >= FLT_MIN)) sc = 0.0f;
    std::memcpy(page + L.index_scale_offset(layer, slot), &sc, 4);
    uint8_t* dst = page + L.index_key_offset(layer, slot);
    if (sc > 0.0f) {
      fp8_e4m3_encode(std::span<const float>(in, static_cast<size_t>(D)), sc, std::span<uint8_t>(dst, static_cast<size_t>(D)));
    } else {
      std::memset(dst, 0, static_cast<size_t>(D));
    }
  }
}

void dsa_index_scores(const KvView& kv, int layer, const float* q, const float* weights, int num_heads, float scale,
                      int seq, int32_t pos, float* out, ThreadPool* pool) {
  dsa_internal::index_scores_with_isa(cpu_isa(), kv, layer, IndexQuery{q, weights, num_heads, scale}, seq, pos, out,
                                      pool);
}

void dsa_select_topk(const KvView& kv, int layer, const float* q, const float* weights, int num_heads,
                     float scale, int topk, std::span<const int32_t> seq_idx,
                     std::span<const int32_t> positions, int32_t* selected, int32_t* counts, ThreadPool* pool) {
  check_index_view(kv);
  CHECK(topk > 0) << "index_topk " << topk;
  const int D = kv.layout.index_dim;
  const int64_t n = static_cast<int64_t>(positions.size());
  // Fewer queries than threads (decode): each query's scoring is split over the pool instead.
  const bool split_scores = pool != nullptr && n < pool->num_threads();
  auto one = [&](int64_t i) {
    const int32_t pos = positions[i];
    int32_t* sel = selected + i * topk;
    if (pos + 1 <= topk) {  // the whole context
      std::iota(sel, sel + pos + 1, 0);
      counts[i] = pos + 1;
      return;
    }
    std::vector<float> s(static_cast<size_t>(pos) + 1);
    dsa_index_scores(kv, layer, q + i * num_heads * D, weights + i * num_heads, num_heads, scale, seq_idx[i], pos,
                     s.data(), split_scores ? pool : nullptr);
    std::vector<int32_t> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    // A strict total order (score descending, then position), so the k first are one set
    // whatever the partition's pivots; they are handed out ascending.
    std::nth_element(order.begin(), order.begin() + (topk - 1), order.end(),
                     [&](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    std::sort(order.begin(), order.begin() + topk);
    std::copy(order.begin(), order.begin() + topk, sel);
    counts[i] = topk;
  };
  if (pool == nullptr || split_scores) {
    for (int64_t i = 0; i < n; ++i) one(i);
  } else {
    pool->parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) one(i);
    });
  }
}

void paged_mla_attention_sparse(const KvView& kv, int layer, const float* q, int num_heads, int value_dim,
                                float scale, std::span<const int32_t> seq_idx, const int32_t* selected,
                                const int32_t* counts, int topk, float* out, ThreadPool* pool) {
  const KvLayout& L = kv.layout;
  CHECK(L.is_latent()) << "sparse MLA attention needs a latent KV layout";
  // The selected rows are gathered, as stored (codes and dynamic scales), into a one-layer
  // scratch cache at positions 0 .. m - 1, and the dense kernel attends over all of them.
  KvLayout g;
  g.num_layers = 1;
  g.page_size = L.page_size;
  g.dtype = L.dtype;
  g.scale_mode = L.scale_mode;
  g.latent_dim = L.latent_dim;
  const bool dynamic = L.scale_mode == KvScaleMode::kDynamic;
  const float static_scales[2] = {L.scale_mode == KvScaleMode::kStatic ? kv.static_scales[layer * 2 + 0] : 0.0f,
                                  L.scale_mode == KvScaleMode::kStatic ? kv.static_scales[layer * 2 + 1] : 0.0f};
  std::vector<uint8_t> buf;
  std::vector<int32_t> table;
  for (size_t i = 0; i < seq_idx.size(); ++i) {
    const int32_t m = counts[i];
    const int32_t* sel = selected + static_cast<int64_t>(i) * topk;
    const int pages = (m + g.page_size - 1) / g.page_size;
    buf.assign(static_cast<size_t>(pages) * g.page_bytes(), 0);
    table.resize(static_cast<size_t>(pages));
    std::iota(table.begin(), table.end(), 0);
    for (int32_t j = 0; j < m; ++j) {
      const uint8_t* src = kv.page_ptr(kv.page_of(seq_idx[i], sel[j]));
      const int slot = sel[j] % L.page_size;
      uint8_t* dst = buf.data() + static_cast<int64_t>(j / g.page_size) * g.page_bytes();
      std::memcpy(dst + g.row_offset(0, 0, j % g.page_size), src + L.row_offset(layer, 0, slot),
                  static_cast<size_t>(L.row_bytes()));
      if (dynamic) std::memcpy(dst + g.row_scale_offset(0, 0, j % g.page_size), src + L.row_scale_offset(layer, 0, slot), 4);
    }
    const int32_t offsets[2] = {0, pages};
    KvView gv{g, buf.data(), table, offsets, L.scale_mode == KvScaleMode::kStatic ? static_scales : nullptr};
    const int32_t zero = 0, last = m - 1;
    paged_mla_attention(gv, 0, q + static_cast<int64_t>(i) * num_heads * L.latent_dim, num_heads, value_dim, scale,
                        std::span<const int32_t>(&zero, 1), std::span<const int32_t>(&last, 1),
                        out + static_cast<int64_t>(i) * num_heads * value_dim, pool);
  }
}

}  // namespace densa
