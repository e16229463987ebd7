#include "disagg/kv_page_convert.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "quant/fp8.h"

namespace densa::disagg {
namespace {

float load_f32(const uint8_t* p) {
  float x;
  std::memcpy(&x, p, 4);
  return x;
}

// Row `r` of (layer, slot) of `page` in format `f`, as f32: GQA rows are (k|v, kv head), r =
// kv * num_kv_heads + head; an MLA page has one latent row per layer and slot.
void decode_row(const KvPageFormat& f, const uint8_t* page, int layer, int r, int slot, float* out) {
  const KvLayout& L = f.layout;
  const uint8_t* row = page + L.row_offset(layer, r, slot);
  const int hd = L.row_dim();
  switch (L.dtype) {
    case DType::kF32:
      std::memcpy(out, row, static_cast<size_t>(hd) * 4);
      return;
    case DType::kBF16: {
      for (int d = 0; d < hd; ++d) {
        uint16_t h;
        std::memcpy(&h, row + 2 * d, 2);
        out[d] = bf16_to_f32(h);
      }
      return;
    }
    default: {
      // Static scales are [layer][k|v][kv head], row r's at layer * rows + r (GQA only).
      const float s = L.scale_mode == KvScaleMode::kStatic
                          ? f.static_scales[static_cast<size_t>(layer) * L.rows_per_layer() + r]
                          : load_f32(page + L.row_scale_offset(layer, r, slot));
      const float* table = fp8_e4m3_decode_table();
      for (int d = 0; d < hd; ++d) out[d] = table[row[d]] * s;
      return;
    }
  }
}

// Stores the f32 row the way kv_store (GQA) and mla_kv_store (latent, dynamic scales) do.
void encode_row(const KvPageFormat& f, uint8_t* page, int layer, int r, int slot, const float* in) {
  const KvLayout& L = f.layout;
  uint8_t* row = page + L.row_offset(layer, r, slot);
  const int hd = L.row_dim();
  switch (L.dtype) {
    case DType::kF32:
      std::memcpy(row, in, static_cast<size_t>(hd) * 4);
      return;
    case DType::kBF16: {
      for (int d = 0; d < hd; ++d) {
        const uint16_t h = f32_to_bf16(in[d]);
        std::memcpy(row + 2 * d, &h, 2);
      }
      return;
    }
    default: {
      float s;
      if (L.scale_mode == KvScaleMode::kStatic) {
        s = f.static_scales[static_cast<size_t>(layer) * L.rows_per_layer() + r];
      } else {
        float amax = 0.0f;
        for (int d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(in[d]));
        s = amax / kFp8E4M3Max;
        if (!(s >= FLT_MIN)) s = 0.0f;
        std::memcpy(page + L.row_scale_offset(layer, r, slot), &s, 4);
      }
      if (s > 0.0f) {
        fp8_e4m3_encode(std::span<const float>(in, hd), s, std::span<uint8_t>(row, hd));
      } else {
        std::memset(row, 0, static_cast<size_t>(hd));
      }
      return;
    }
  }
}

}  // namespace

bool same_kv_format(const KvPageFormat& a, const KvPageFormat& b) {
  if (a.layout.dtype != b.layout.dtype || a.layout.scale_mode != b.layout.scale_mode) return false;
  if (a.layout.scale_mode != KvScaleMode::kStatic) return true;
  return a.static_scales.size() == b.static_scales.size() &&
         std::equal(a.static_scales.begin(), a.static_scales.end(), b.static_scales.begin());
}

void convert_kv_page(const KvPageFormat& from, const uint8_t* src, const KvPageFormat& to, int32_t num_tokens,
                     uint8_t* dst) {
  const KvLayout& A = from.layout;
  const KvLayout& B = to.layout;
  CHECK(A.num_layers == B.num_layers && A.num_kv_heads == B.num_kv_heads && A.head_dim == B.head_dim &&
        A.latent_dim == B.latent_dim && A.index_dim == B.index_dim && A.page_size == B.page_size)
      << "convert_kv_page between different KV shapes";
  CHECK(num_tokens >= 0 && num_tokens <= B.page_size) << "num_tokens " << num_tokens;
  // A latent row's static scales are two per layer (c_kv | k_pe), split where the layout does
  // not say: such pages move only as they are (check_compatible refuses a conversion).
  CHECK(!B.is_latent() || same_kv_format(from, to) ||
        (A.scale_mode != KvScaleMode::kStatic && B.scale_mode != KvScaleMode::kStatic))
      << "latent KV pages with static scales convert only to the same format";
  std::memset(dst, 0, static_cast<size_t>(B.page_bytes()));
  const bool copy = same_kv_format(from, to);
  const size_t row_bytes = static_cast<size_t>(B.row_bytes());
  std::vector<float> row(static_cast<size_t>(B.row_dim()));
  for (int l = 0; l < B.num_layers; ++l) {
    for (int r = 0; r < B.rows_per_layer(); ++r) {
      for (int t = 0; t < num_tokens; ++t) {
        if (copy) {
          std::memcpy(dst + B.row_offset(l, r, t), src + A.row_offset(l, r, t), row_bytes);
          if (B.scale_mode == KvScaleMode::kDynamic) {
            std::memcpy(dst + B.row_scale_offset(l, r, t), src + A.row_scale_offset(l, r, t), 4);
          }
          continue;
        }
        decode_row(from, src, l, r, t, row.data());
        encode_row(to, dst, l, r, t, row.data());
      }
    }
    // DSA: the indexer's FP8 keys and their scales are stored alike whatever the KV dtype.
    for (int t = 0; t < num_tokens && B.index_dim > 0; ++t) {
      std::memcpy(dst + B.index_key_offset(l, t), src + A.index_key_offset(l, t), static_cast<size_t>(B.index_dim));
      std::memcpy(dst + B.index_scale_offset(l, t), src + A.index_scale_offset(l, t), 4);
    }
  }
}

}  // namespace densa::disagg
