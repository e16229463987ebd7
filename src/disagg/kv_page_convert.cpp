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

// Row (layer, kv, head, slot) of `page` in format `f`, as f32.
void decode_row(const KvPageFormat& f, const uint8_t* page, int layer, int kv, int head, int slot, float* out) {
  const KvLayout& L = f.layout;
  const uint8_t* row = page + L.data_offset(layer, kv, head, slot);
  const int hd = L.head_dim;
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
      const float s = L.scale_mode == KvScaleMode::kStatic
                          ? f.static_scales[(static_cast<size_t>(layer) * 2 + kv) * L.num_kv_heads + head]
                          : load_f32(page + L.scale_offset(layer, kv, head, slot));
      const float* table = fp8_e4m3_decode_table();
      for (int d = 0; d < hd; ++d) out[d] = table[row[d]] * s;
      return;
    }
  }
}

// Stores the f32 row the way kv_store does.
void encode_row(const KvPageFormat& f, uint8_t* page, int layer, int kv, int head, int slot, const float* in) {
  const KvLayout& L = f.layout;
  uint8_t* row = page + L.data_offset(layer, kv, head, slot);
  const int hd = L.head_dim;
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
        s = f.static_scales[(static_cast<size_t>(layer) * 2 + kv) * L.num_kv_heads + head];
      } else {
        float amax = 0.0f;
        for (int d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(in[d]));
        s = amax / kFp8E4M3Max;
        if (!(s >= FLT_MIN)) s = 0.0f;
        std::memcpy(page + L.scale_offset(layer, kv, head, slot), &s, 4);
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
        A.page_size == B.page_size)
      << "convert_kv_page between different KV shapes";
  CHECK(num_tokens >= 0 && num_tokens <= B.page_size) << "num_tokens " << num_tokens;
  std::memset(dst, 0, static_cast<size_t>(B.page_bytes()));
  const bool copy = same_kv_format(from, to);
  const size_t row_bytes = static_cast<size_t>(B.head_dim * B.elem_bytes());
  std::vector<float> row(static_cast<size_t>(B.head_dim));
  for (int l = 0; l < B.num_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int h = 0; h < B.num_kv_heads; ++h) {
        for (int t = 0; t < num_tokens; ++t) {
          if (copy) {
            std::memcpy(dst + B.data_offset(l, kv, h, t), src + A.data_offset(l, kv, h, t), row_bytes);
            if (B.scale_mode == KvScaleMode::kDynamic) {
              std::memcpy(dst + B.scale_offset(l, kv, h, t), src + A.scale_offset(l, kv, h, t), 4);
            }
            continue;
          }
          decode_row(from, src, l, kv, h, t, row.data());
          encode_row(to, dst, l, kv, h, t, row.data());
        }
      }
    }
  }
}

}  // namespace densa::disagg
