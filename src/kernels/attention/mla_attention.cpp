#include "kernels/mla_attention.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "kernels/internal/attention_isa.h"
#include "quant/fp8.h"

namespace densa {

namespace {

using attention_internal::AttnTileOps;
using attention_internal::kAttnTile;
using attention_internal::kMaxGroupChunk;

constexpr int kMaxLatentDim = 512;  // kv_lora_rank (DeepSeek-V3 / Kimi K2: 512)
constexpr int kMaxRopeDim = 128;    // qk_rope_head_dim (64)

// A latent view: F32 / BF16 rows without scales, or FP8 rows with dynamic per-row scales or
// static per-layer (c_kv, k_pe) scales.
void check_latent_view(const KvView& kv, int value_dim) {
  const KvLayout& L = kv.layout;
  CHECK(L.is_latent()) << "MLA attention needs a latent KV layout";
  if (L.dtype == DType::kFP8E4M3) {
    CHECK(L.scale_mode == KvScaleMode::kDynamic ||
          (L.scale_mode == KvScaleMode::kStatic && kv.static_scales != nullptr))
        << "fp8 latent KV needs dynamic scales or static scales";
  } else {
    CHECK(L.dtype == DType::kF32 || L.dtype == DType::kBF16) << "unsupported KV dtype " << dtype_name(L.dtype);
    CHECK(L.scale_mode == KvScaleMode::kNone) << "KV " << dtype_name(L.dtype) << " takes no scales";
  }
  CHECK(value_dim > 0 && value_dim <= kMaxLatentDim && value_dim < L.latent_dim &&
        L.latent_dim - value_dim <= kMaxRopeDim)
      << "latent_dim " << L.latent_dim << " value_dim " << value_dim;
}

inline float load_f32(const uint8_t* p) {
  float x;
  std::memcpy(&x, p, 4);
  return x;
}

// Query heads [h0, h0 + G) of one token of sequence `seq` at position `pos`. q, out point at
// head h0. The latent rows of each tile are decoded once (c_kv part and rope part into
// separate buffers) and serve all G heads.
void attend_latent(const AttnTileOps& ops, const KvView& kv, int layer, int seq, int32_t pos,
                   const float* q, int G, int value_dim, float scale, float* out) {
  const KvLayout& L = kv.layout;
  const int C = value_dim, R = L.latent_dim - value_dim, D = L.latent_dim;
  const bool fp8 = L.dtype == DType::kFP8E4M3;
  const bool fp8_static = fp8 && L.scale_mode == KvScaleMode::kStatic;
  // Static scales are constant over the rows: folded into the query parts and the output.
  const float c_scale = fp8_static ? kv.static_scales[layer * 2 + 0] : 1.0f;
  const float r_scale = fp8_static ? kv.static_scales[layer * 2 + 1] : 1.0f;
  alignas(64) float qc[kMaxGroupChunk * kMaxLatentDim];
  alignas(64) float qr[kMaxGroupChunk * kMaxRopeDim];
  alignas(64) float acc[kMaxGroupChunk * kMaxLatentDim];
  alignas(64) float cbuf[kAttnTile * kMaxLatentDim];
  alignas(64) float rbuf[kAttnTile * kMaxRopeDim];
  alignas(64) float s[kMaxGroupChunk * kAttnTile];
  alignas(64) float s_rope[kMaxGroupChunk * kAttnTile];
  float m[kMaxGroupChunk], l[kMaxGroupChunk], rs[kAttnTile];
  const uint8_t* crows[kAttnTile];
  const uint8_t* rrows[kAttnTile];
  const int32_t* pages = kv.block_table.data() + kv.block_offsets[seq];
  const int64_t row_bytes = L.row_bytes(), rope_off = static_cast<int64_t>(C) * L.elem_bytes();
  const int64_t data_off = L.row_offset(layer, 0, 0);
  const int64_t scale_off = fp8 && !fp8_static ? L.row_scale_offset(layer, 0, 0) : 0;

  for (int g = 0; g < G; ++g) {
    for (int d = 0; d < C; ++d) qc[g * C + d] = q[static_cast<int64_t>(g) * D + d] * scale * c_scale;
    for (int d = 0; d < R; ++d) qr[g * R + d] = q[static_cast<int64_t>(g) * D + C + d] * scale * r_scale;
    std::fill_n(acc + g * C, C, 0.0f);
    m[g] = -std::numeric_limits<float>::infinity();
    l[g] = 0.0f;
  }
  for (int32_t start = 0; start <= pos; start += kAttnTile) {
    const int T = std::min<int32_t>(kAttnTile, pos + 1 - start);
    int32_t page_idx = start / L.page_size;
    int slot = start % L.page_size;
    const uint8_t* page = kv.page_ptr(pages[page_idx]);
    for (int t = 0; t < T; ++t) {
      crows[t] = page + data_off + slot * row_bytes;
      rrows[t] = crows[t] + rope_off;
      rs[t] = fp8_static ? ops.fp8_unit : fp8 ? load_f32(page + scale_off + slot * 4) * ops.fp8_unit : 1.0f;
      if (++slot == L.page_size && t + 1 < T) {
        slot = 0;
        page = kv.page_ptr(pages[++page_idx]);
      }
    }
    ops.decode_rows(crows, T, C, L.dtype, cbuf);
    ops.decode_rows(rrows, T, R, L.dtype, rbuf);
    ops.scores(qc, G, cbuf, T, C, rs, s);
    ops.scores(qr, G, rbuf, T, R, rs, s_rope);
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < T; ++t) s[g * kAttnTile + t] += s_rope[g * kAttnTile + t];
    ops.softmax_update(s, G, T, C, rs, m, l, acc);
    ops.accumulate(s, G, cbuf, T, C, acc);
  }
  for (int g = 0; g < G; ++g) {
    const float inv = c_scale / l[g];
    for (int d = 0; d < C; ++d) out[static_cast<int64_t>(g) * C + d] = acc[g * C + d] * inv;
  }
}

}  // namespace

void mla_kv_store(const KvView& kv, int layer, const float* latent, int value_dim, std::span<const int32_t> seq_idx,
                  std::span<const int32_t> positions) {
  const KvLayout& L = kv.layout;
  check_latent_view(kv, value_dim);
  const size_t D = static_cast<size_t>(L.latent_dim), C = static_cast<size_t>(value_dim);
  for (size_t i = 0; i < positions.size(); ++i) {
    const float* in = latent + i * D;
    const int32_t pos = positions[i];
    uint8_t* page = kv.page_ptr(kv.page_of(seq_idx[i], pos));
    const int slot = pos % L.page_size;
    uint8_t* dst = page + L.row_offset(layer, 0, slot);
    switch (L.dtype) {
      case DType::kF32:
        std::memcpy(dst, in, D * 4);
        break;
      case DType::kBF16: {
        uint16_t* d16 = reinterpret_cast<uint16_t*>(dst);
        for (size_t d = 0; d < D; ++d) d16[d] = f32_to_bf16(in[d]);
        break;
      }
      default: {
        if (L.scale_mode == KvScaleMode::kStatic) {
          fp8_e4m3_encode(std::span<const float>(in, C), kv.static_scales[layer * 2 + 0], std::span<uint8_t>(dst, C));
          fp8_e4m3_encode(std::span<const float>(in + C, D - C), kv.static_scales[layer * 2 + 1],
                          std::span<uint8_t>(dst + C, D - C));
          break;
        }
        float amax = 0.0f;
        for (size_t d = 0; d < D; ++d) amax = std::max(amax, std::fabs(in[d]));
        float sc = amax / kFp8E4M3Max;
        if (!(sc >= FLT_MIN)) sc = 0.0f;
        std::memcpy(page + L.row_scale_offset(layer, 0, slot), &sc, 4);
        if (sc > 0.0f) {
          fp8_e4m3_encode(std::span<const float>(in, D), sc, std::span<uint8_t>(dst, D));
        } else {
          std::memset(dst, 0, D);
        }
      }
    }
  }
}

void paged_mla_attention(const KvView& kv, int layer, const float* q, int num_heads, int value_dim,
                         float scale, std::span<const int32_t> seq_idx,
                         std::span<const int32_t> positions, float* out, ThreadPool* pool) {
  check_latent_view(kv, value_dim);
  const KvLayout& L = kv.layout;
  const int C = value_dim, R = L.latent_dim - value_dim, D = L.latent_dim;
  const bool avx512 = cpu_isa() == CpuIsa::kAvx512Bf16 && C % 16 == 0 && R % 16 == 0;
  const bool avx2 = cpu_isa() == CpuIsa::kAvx2 && C % 8 == 0 && R % 8 == 0;
  const AttnTileOps& ops = avx512 ? attention_internal::kAvx512Ops
                           : avx2 ? attention_internal::kAvx2Ops
                                  : attention_internal::kScalarOps;
  const int num_chunks = (num_heads + kMaxGroupChunk - 1) / kMaxGroupChunk;
  const int64_t items = static_cast<int64_t>(positions.size()) * num_chunks;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i = item / num_chunks;
      const int h0 = static_cast<int>(item % num_chunks) * kMaxGroupChunk;
      const int G = std::min(kMaxGroupChunk, num_heads - h0);
      attend_latent(ops, kv, layer, seq_idx[i], positions[i], q + (i * num_heads + h0) * D, G, C, scale,
                    out + (i * num_heads + h0) * C);
    }
  };
  if (pool != nullptr && items > 1) {
    pool->parallel_for(items, run, 1);
  } else {
    run(0, items);
  }
}

void rope_with_freqs(float* x, const int32_t* positions, int64_t n, int num_heads,
                     int64_t token_stride, int64_t head_stride, int rot_dim,
                     std::span<const double> inv_freq, float attn_factor, bool interleaved) {
  const int half = rot_dim / 2;
  CHECK(rot_dim % 2 == 0 && static_cast<int>(inv_freq.size()) == half) << "rope: rot_dim " << rot_dim;
  for (int64_t t = 0; t < n; ++t) {
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[t]) * inv_freq[i];
      const float c = static_cast<float>(std::cos(angle)) * attn_factor;
      const float s = static_cast<float>(std::sin(angle)) * attn_factor;
      for (int h = 0; h < num_heads; ++h) {
        float* v = x + t * token_stride + h * head_stride;
        float& a = interleaved ? v[2 * i] : v[i];
        float& b = interleaved ? v[2 * i + 1] : v[i + half];
        const float a0 = a, b0 = b;
        a = a0 * c - b0 * s;
        b = b0 * c + a0 * s;
      }
    }
  }
}

}  // namespace densa
