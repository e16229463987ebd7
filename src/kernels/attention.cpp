#include "kernels/attention.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/dtype.h"

namespace densa {

namespace {

constexpr int kMaxHeadDim = 512;

// Reads one K or V row (head_dim elements) of `head` at `pos` of sequence `seq` as fp32.
inline void load_row(const KvView& kv, int layer, int which, int seq, int head, int32_t pos,
                     float* out) {
  const KvLayout& L = kv.layout;
  const uint8_t* page = kv.page_ptr(kv.page_of(seq, pos));
  const int slot = pos % L.page_size;
  const uint8_t* src = page + L.data_offset(layer, which, head, slot);
  switch (L.dtype) {
    case DType::kF32:
      std::memcpy(out, src, static_cast<size_t>(L.head_dim) * 4);
      return;
    case DType::kBF16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
      for (int d = 0; d < L.head_dim; ++d) out[d] = bf16_to_f32(s[d]);
      return;
    }
    default:
      CHECK(false) << "paged_attention: unsupported KV dtype " << dtype_name(L.dtype);
  }
}

inline void store_row(const KvView& kv, int layer, int which, int seq, int head, int32_t pos,
                      const float* in) {
  const KvLayout& L = kv.layout;
  uint8_t* page = kv.page_ptr(kv.page_of(seq, pos));
  const int slot = pos % L.page_size;
  uint8_t* dst = page + L.data_offset(layer, which, head, slot);
  switch (L.dtype) {
    case DType::kF32:
      std::memcpy(dst, in, static_cast<size_t>(L.head_dim) * 4);
      return;
    case DType::kBF16: {
      uint16_t* d16 = reinterpret_cast<uint16_t*>(dst);
      for (int d = 0; d < L.head_dim; ++d) d16[d] = f32_to_bf16(in[d]);
      return;
    }
    default:
      CHECK(false) << "kv_store: unsupported KV dtype " << dtype_name(L.dtype);
  }
}

}  // namespace

void kv_store(const KvView& kv, int layer, const float* k, const float* v,
              std::span<const int32_t> seq_idx, std::span<const int32_t> positions) {
  const KvLayout& L = kv.layout;
  const int64_t row = static_cast<int64_t>(L.num_kv_heads) * L.head_dim;
  for (size_t i = 0; i < positions.size(); ++i) {
    for (int h = 0; h < L.num_kv_heads; ++h) {
      store_row(kv, layer, 0, seq_idx[i], h, positions[i], k + i * row + h * L.head_dim);
      store_row(kv, layer, 1, seq_idx[i], h, positions[i], v + i * row + h * L.head_dim);
    }
  }
}

void paged_attention(const KvView& kv, int layer, const float* q, int num_heads, float scale,
                     std::span<const int32_t> seq_idx, std::span<const int32_t> positions,
                     float* out, ThreadPool* pool) {
  const KvLayout& L = kv.layout;
  const int hd = L.head_dim;
  CHECK(hd <= kMaxHeadDim) << "head_dim " << hd;
  CHECK(num_heads % L.num_kv_heads == 0);
  const int group = num_heads / L.num_kv_heads;
  const int64_t n = static_cast<int64_t>(positions.size());

  // One work item per (token, query head); each is computed independently with a fixed
  // order over positions (online softmax), so results do not depend on the batch.
  auto run = [&](int64_t begin, int64_t end) {
    float krow[kMaxHeadDim];
    float vrow[kMaxHeadDim];
    float acc[kMaxHeadDim];
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i = item / num_heads;
      const int h = static_cast<int>(item % num_heads);
      const int kvh = h / group;
      const float* qh = q + (i * num_heads + h) * hd;
      float* oh = out + (i * num_heads + h) * hd;
      float m = -std::numeric_limits<float>::infinity();
      float l = 0.0f;
      for (int d = 0; d < hd; ++d) acc[d] = 0.0f;
      for (int32_t p = 0; p <= positions[i]; ++p) {
        load_row(kv, layer, 0, seq_idx[i], kvh, p, krow);
        float s = 0.0f;
        for (int d = 0; d < hd; ++d) s += qh[d] * krow[d];
        s *= scale;
        load_row(kv, layer, 1, seq_idx[i], kvh, p, vrow);
        if (s > m) {
          const float c = std::exp(m - s);
          l *= c;
          for (int d = 0; d < hd; ++d) acc[d] *= c;
          m = s;
        }
        const float e = std::exp(s - m);
        l += e;
        for (int d = 0; d < hd; ++d) acc[d] += e * vrow[d];
      }
      const float inv = 1.0f / l;
      for (int d = 0; d < hd; ++d) oh[d] = acc[d] * inv;
    }
  };
  if (pool != nullptr) {
    pool->parallel_for(n * num_heads, run, 4);
  } else {
    run(0, n * num_heads);
  }
}

}  // namespace densa
