#include "quant/affine8.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "quant/ggml_blocks.h"
#include "quant/ggml_iq4.h"
#include "quant/ggml_kquants.h"
#include "quant/mxfp4.h"

namespace densa {
namespace {

float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One source block decoded into groups: scale[g], min[g] and codes[block elements]. Each
// decoder reads the block exactly as the reference dequantizer beside it in quant/ does
// (tests/quant/affine8_test.cpp checks the values against those).
struct Groups {
  float scale[16];
  float min[16];
  uint8_t code[256];
};

// Q4_1 / Q5_0 / Q5_1: 32 elements; the fifth bit of element j is bit j of qh.
void decode_legacy(const uint8_t* blk, bool has_min, bool five, Groups& g) {
  const float d = load_f16(blk);
  const float m = has_min ? load_f16(blk + 2) : -16.0f * d;
  const int64_t head = has_min ? 4 : 2;
  const uint32_t qh = five ? load_u32(blk + head) : 0;
  const uint8_t* qs = blk + head + (five ? 4 : 0);
  g.scale[0] = d;
  g.min[0] = m;
  for (int j = 0; j < 16; ++j) {
    g.code[j] = static_cast<uint8_t>((qs[j] & 0x0f) | (((qh >> j) & 1u) << 4));
    g.code[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
}

void decode_q4_1(const uint8_t* blk, Groups& g) { decode_legacy(blk, true, false, g); }
void decode_q5_0(const uint8_t* blk, Groups& g) { decode_legacy(blk, false, true, g); }
void decode_q5_1(const uint8_t* blk, Groups& g) { decode_legacy(blk, true, true, g); }

void decode_q2_k(const uint8_t* blk, Groups& g) {
  const uint8_t* scales = blk;
  const uint8_t* qs = blk + 16;
  const float d = load_f16(blk + 80), dmin = load_f16(blk + 82);
  for (int s = 0; s < 16; ++s) {
    g.scale[s] = d * static_cast<float>(scales[s] & 0x0f);
    g.min[s] = -(dmin * static_cast<float>(scales[s] >> 4));
  }
  for (int e = 0; e < 256; ++e) g.code[e] = static_cast<uint8_t>((qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
}

void decode_q3_k(const uint8_t* blk, Groups& g) {
  const uint8_t* hmask = blk;
  const uint8_t* qs = blk + 32;
  const float d = load_f16(blk + 108);
  for (int s = 0; s < 16; ++s) {
    g.scale[s] = d * static_cast<float>(q3_k_scale(blk + 96, s) - 32);
    g.min[s] = -4.0f * g.scale[s];
  }
  for (int e = 0; e < 256; ++e) {
    const int shift = (e % 128) / 32;
    const int low = (qs[32 * (e / 128) + e % 32] >> (2 * shift)) & 3;
    const int high = (hmask[e % 32] >> (4 * (e / 128) + shift)) & 1;
    g.code[e] = static_cast<uint8_t>(low + 4 * high);  // value (low - (high ? 0 : 4)) * scale
  }
}

void decode_q45_k(const uint8_t* blk, bool five, Groups& g) {
  const float d = load_f16(blk), dmin = load_f16(blk + 2);
  const uint8_t* scales = blk + 4;
  const uint8_t* qh = blk + 16;
  const uint8_t* qs = blk + (five ? 48 : 16);
  for (int s = 0; s < 8; ++s) {
    int sc = 0, m = 0;
    kquant_scale_min(scales, s, sc, m);
    g.scale[s] = d * static_cast<float>(sc);
    g.min[s] = -(dmin * static_cast<float>(m));
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = qs[32 * (s / 2) + l];
      int q = (s % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
      if (five && ((qh[l] >> s) & 1)) q += 16;
      g.code[32 * s + l] = static_cast<uint8_t>(q);
    }
  }
}

void decode_q4_k(const uint8_t* blk, Groups& g) { decode_q45_k(blk, false, g); }
void decode_q5_k(const uint8_t* blk, Groups& g) { decode_q45_k(blk, true, g); }

void decode_q6_k(const uint8_t* blk, Groups& g) {
  const uint8_t* ql = blk;
  const uint8_t* qh = blk + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(blk + 192);
  const float d = load_f16(blk + 208);
  for (int s = 0; s < 16; ++s) {
    g.scale[s] = d * static_cast<float>(scales[s]);
    g.min[s] = -32.0f * g.scale[s];
  }
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t byte = ql[64 * h + 32 * (k & 1) + l];
    const int low = k >= 2 ? (byte >> 4) : (byte & 0x0f);
    const int high = (qh[32 * h + l] >> (2 * k)) & 3;
    g.code[e] = static_cast<uint8_t>(low | (high << 4));
  }
}

// 32 IQ4_NL-ordered nibbles (low nibbles are elements 0-15, high 16-31) as grid value + 128.
void iq4_codes(const uint8_t* qs, uint8_t* code) {
  for (int j = 0; j < 16; ++j) {
    code[j] = static_cast<uint8_t>(kIq4Grid[qs[j] & 0x0f] + 128);
    code[j + 16] = static_cast<uint8_t>(kIq4Grid[qs[j] >> 4] + 128);
  }
}

void decode_iq4_nl(const uint8_t* blk, Groups& g) {
  g.scale[0] = load_f16(blk);
  g.min[0] = -128.0f * g.scale[0];
  iq4_codes(blk + 2, g.code);
}

void decode_iq4_xs(const uint8_t* blk, Groups& g) {
  const float d = load_f16(blk);
  uint16_t scales_h;
  std::memcpy(&scales_h, blk + 2, 2);
  for (int s = 0; s < 8; ++s) {
    const int ls = ((blk[4 + s / 2] >> (4 * (s % 2))) & 0x0f) | (((scales_h >> (2 * s)) & 3) << 4);
    g.scale[s] = d * static_cast<float>(ls - 32);
    g.min[s] = -128.0f * g.scale[s];
    iq4_codes(blk + 8 + 16 * s, g.code + 32 * s);
  }
}

void decode_mxfp4(const uint8_t* blk, Groups& g) {
  g.scale[0] = mxfp4_half_scale(blk[0]);
  g.min[0] = -12.0f * g.scale[0];  // grid values -12 .. 12 stored as value + 12
  for (int j = 0; j < 16; ++j) {
    g.code[j] = static_cast<uint8_t>(kMxfp4Grid[blk[1 + j] & 0x0f] + 12);
    g.code[j + 16] = static_cast<uint8_t>(kMxfp4Grid[blk[1 + j] >> 4] + 12);
  }
}

struct Decoder {
  uint32_t type;
  DType dtype;
  void (*decode)(const uint8_t* blk, Groups& g);
};

constexpr Decoder kDecoders[] = {
    {ggml_type::kQ4_1, DType::kA8G32, decode_q4_1},   {ggml_type::kQ5_0, DType::kA8G32, decode_q5_0},
    {ggml_type::kQ5_1, DType::kA8G32, decode_q5_1},   {ggml_type::kQ2_K, DType::kA8G16, decode_q2_k},
    {ggml_type::kQ3_K, DType::kA8G16, decode_q3_k},   {ggml_type::kQ4_K, DType::kA8G32, decode_q4_k},
    {ggml_type::kQ5_K, DType::kA8G32, decode_q5_k},   {ggml_type::kQ6_K, DType::kA8G16, decode_q6_k},
    {ggml_type::kIQ4_NL, DType::kA8G32, decode_iq4_nl}, {ggml_type::kIQ4_XS, DType::kA8G32, decode_iq4_xs},
    {ggml_type::kMXFP4, DType::kA8G32, decode_mxfp4},
};

const Decoder* decoder_for(uint32_t type) {
  for (const Decoder& d : kDecoders) {
    if (d.type == type) return &d;
  }
  return nullptr;
}

}  // namespace

std::optional<DType> affine8_dtype_for_ggml(uint32_t ggml_type) {
  const Decoder* d = decoder_for(ggml_type);
  if (d == nullptr) return std::nullopt;
  return d->dtype;
}

bool affine8_from_ggml(uint32_t ggml_type, const uint8_t* blocks, int64_t rows, int64_t cols, uint8_t* out) {
  const Decoder* dec = decoder_for(ggml_type);
  const GgmlBlockFormat* fmt = ggml_block_format(ggml_type);
  CHECK(dec != nullptr && fmt != nullptr) << "affine8: ggml type " << ggml_type;
  CHECK(cols % kAffine8Block == 0 && cols % fmt->block_elems == 0) << "affine8: cols " << cols;
  const DType t = dec->dtype;
  const int64_t group = affine8_group(t), per_block = affine8_groups_per_block(t);
  const int64_t src_groups = fmt->block_elems / group;  // groups per source block
  const int64_t row_bytes = dtype_row_bytes(t, cols);
  Groups g;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = out + r * row_bytes;
    for (int64_t k0 = 0; k0 < cols; k0 += fmt->block_elems) {
      dec->decode(blocks + (r * cols + k0) / fmt->block_elems * fmt->block_bytes, g);
      for (int64_t s = 0; s < src_groups; ++s) {
        if (!std::isfinite(g.scale[s]) || !std::isfinite(g.min[s])) return false;
        const int64_t k = k0 + s * group;  // first column of this group
        const int64_t b = k / kAffine8Block, slot = k % kAffine8Block / group;
        uint8_t* blk = row + b * dtype_block_bytes(t);
        std::memcpy(blk + k % kAffine8Block, g.code + s * group, static_cast<size_t>(group));
        std::memcpy(blk + kAffine8Block + 4 * slot, &g.scale[s], 4);
        std::memcpy(blk + kAffine8Block + 4 * (per_block + slot), &g.min[s], 4);
      }
    }
  }
  return true;
}

void affine8_dequantize(DType t, const uint8_t* row, int64_t begin, int64_t count, float* out) {
  CHECK(is_affine8(t)) << "affine8: dtype " << dtype_name(t);
  const int64_t group = affine8_group(t);
  for (int64_t k = begin; k < begin + count; ++k) {
    const int64_t b = k / kAffine8Block, slot = k % kAffine8Block / group;
    float scale, min;
    std::memcpy(&scale, affine8_scales(t, row, b) + slot, 4);
    std::memcpy(&min, affine8_mins(t, row, b) + slot, 4);
    out[k - begin] = std::fmaf(scale, static_cast<float>(affine8_codes(t, row, b)[k % kAffine8Block]), min);
  }
}

}  // namespace densa
