#include "kernels/dsa_attention.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "quant/fp8.h"

namespace densa {
namespace {

inline float load_f32(const uint8_t* p) {
  float x;
  std::memcpy(&x, p, 4);
  return x;
}

// Decodes latent row (layer, slot) of `page` into out [latent_dim].
void load_latent_row(const KvView& kv, int layer, const uint8_t* page, int slot, int value_dim, float* out) {
  const KvLayout& L = kv.layout;
  const int D = L.latent_dim;
  const uint8_t* row = page + L.row_offset(layer, 0, slot);
  switch (L.dtype) {
    case DType::kF32: std::memcpy(out, row, static_cast<size_t>(D) * 4); return;
    case DType::kBF16:
      for (int d = 0; d < D; ++d) {
        uint16_t h;
        std::memcpy(&h, row + 2 * d, 2);
        out[d] = bf16_to_f32(h);
      }
      return;
    default: {
      const float* table = fp8_e4m3_decode_table();
      if (L.scale_mode == KvScaleMode::kStatic) {
        const float cs = kv.static_scales[layer * 2 + 0], rs = kv.static_scales[layer * 2 + 1];
        for (int d = 0; d < D; ++d) out[d] = table[row[d]] * (d < value_dim ? cs : rs);
      } else {
        const float s = load_f32(page + L.row_scale_offset(layer, 0, slot));
        for (int d = 0; d < D; ++d) out[d] = table[row[d]] * s;
      }
    }
  }
}

// Sums in 16 independent lanes, so the compiler vectorizes them without reassociating: the
// order (lane j holds the terms d = j mod 16, summed in d order, then the lanes in order) is
// fixed, whatever the ISA.
constexpr int kLanes = 16;

float dot_lanes(const float* a, const float* b, int n) {
  float acc[kLanes] = {};
  int d = 0;
  for (; d + kLanes <= n; d += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += a[d + j] * b[d + j];
  }
  for (int j = 0; d < n; ++d, ++j) acc[j] += a[d] * b[d];
  float total = 0.0f;
  for (float v : acc) total += v;
  return total;
}

// y += w * x over n values.
void axpy(float w, const float* x, float* y, int n) {
  for (int d = 0; d < n; ++d) y[d] += w * x[d];
}

void check_index_view(const KvView& kv) {
  CHECK(kv.layout.is_latent() && kv.layout.index_dim > 0) << "DSA needs a latent KV layout with index keys";
}

}  // namespace

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
                      int seq, int32_t pos, float* out) {
  check_index_view(kv);
  const KvLayout& L = kv.layout;
  const int D = L.index_dim;
  const float* table = fp8_e4m3_decode_table();
  std::vector<float> k(static_cast<size_t>(D));
  for (int32_t p = 0; p <= pos; ++p) {
    const uint8_t* page = kv.page_ptr(kv.page_of(seq, p));
    const int slot = p % L.page_size;
    const float s = load_f32(page + L.index_scale_offset(layer, slot));
    const uint8_t* codes = page + L.index_key_offset(layer, slot);
    for (int d = 0; d < D; ++d) k[d] = table[codes[d]] * s;
    float total = 0.0f;
    for (int h = 0; h < num_heads; ++h) {
      const float dot = dot_lanes(q + static_cast<int64_t>(h) * D, k.data(), D);
      total += weights[h] * std::max(0.0f, dot * scale);
    }
    out[p] = total;
  }
}

void dsa_select_topk(const KvView& kv, int layer, const float* q, const float* weights, int num_heads,
                     float scale, int topk, std::span<const int32_t> seq_idx,
                     std::span<const int32_t> positions, int32_t* selected, int32_t* counts, ThreadPool* pool) {
  check_index_view(kv);
  CHECK(topk > 0) << "index_topk " << topk;
  const int D = kv.layout.index_dim;
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
                     s.data());
    std::vector<int32_t> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + topk, order.end(),
                      [&](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    std::sort(order.begin(), order.begin() + topk);
    std::copy(order.begin(), order.begin() + topk, sel);
    counts[i] = topk;
  };
  const int64_t n = static_cast<int64_t>(positions.size());
  if (pool == nullptr) {
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
  const int D = L.latent_dim, C = value_dim, H = num_heads;
  auto one = [&](int64_t i) {
    const int32_t m = counts[i];
    const int32_t* sel = selected + i * topk;
    std::vector<float> rows(static_cast<size_t>(m) * D), p(static_cast<size_t>(m));
    for (int32_t j = 0; j < m; ++j) {
      const int32_t pos = sel[j];
      load_latent_row(kv, layer, kv.page_ptr(kv.page_of(seq_idx[i], pos)), pos % L.page_size, C,
                      rows.data() + static_cast<int64_t>(j) * D);
    }
    for (int h = 0; h < H; ++h) {
      const float* qh = q + (i * H + h) * D;
      float mx = -INFINITY;
      for (int32_t j = 0; j < m; ++j) {
        p[j] = dot_lanes(qh, rows.data() + static_cast<int64_t>(j) * D, D) * scale;
        mx = std::max(mx, p[j]);
      }
      float sum = 0.0f;
      for (int32_t j = 0; j < m; ++j) sum += (p[j] = std::exp(p[j] - mx));
      float* o = out + (i * H + h) * C;
      std::fill(o, o + C, 0.0f);
      for (int32_t j = 0; j < m; ++j) axpy(p[j] / sum, rows.data() + static_cast<int64_t>(j) * D, o, C);
    }
  };
  const int64_t n = static_cast<int64_t>(seq_idx.size());
  if (pool == nullptr) {
    for (int64_t i = 0; i < n; ++i) one(i);
  } else {
    pool->parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) one(i);
    });
  }
}

}  // namespace densa
