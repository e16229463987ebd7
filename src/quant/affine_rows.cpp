#include "quant/affine_rows.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "quant/block_bytes.h"
#include "quant/ggml_blocks.h"
#include "quant/ggml_iq4.h"
#include "quant/ggml_kquants.h"
#include "quant/mxfp4.h"

namespace densa {
namespace {

using block_bytes::load_f16;
using block_bytes::load_u32;

// One source block decoded into groups: codes[block elements], and either scale[g], min[g]
// (the 32-element formats) or, for the K-quants, the block's D and M with integer s[g], m[g]
// (scale = D * s, min = M * m, exact). Each decoder reads the block exactly as the reference
// dequantizer beside it in quant/ does (tests/quant/affine_rows_test.cpp checks the values).
struct Groups {
  float scale[16];
  float min[16];
  float d = 0, m = 0;  // K-quants: D, M
  int8_t s[16], mi[16];
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
  g.d = load_f16(blk + 80);
  g.m = -load_f16(blk + 82);
  for (int s = 0; s < 16; ++s) {
    g.s[s] = static_cast<int8_t>(scales[s] & 0x0f);
    g.mi[s] = static_cast<int8_t>(scales[s] >> 4);
  }
  for (int e = 0; e < 256; ++e) g.code[e] = static_cast<uint8_t>((qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
}

void decode_q3_k(const uint8_t* blk, Groups& g) {
  const uint8_t* hmask = blk;
  const uint8_t* qs = blk + 32;
  g.d = load_f16(blk + 108);
  g.m = -4.0f * g.d;
  for (int s = 0; s < 16; ++s) g.s[s] = g.mi[s] = static_cast<int8_t>(q3_k_scale(blk + 96, s) - 32);
  for (int e = 0; e < 256; ++e) {
    const int shift = (e % 128) / 32;
    const int low = (qs[32 * (e / 128) + e % 32] >> (2 * shift)) & 3;
    const int high = (hmask[e % 32] >> (4 * (e / 128) + shift)) & 1;
    g.code[e] = static_cast<uint8_t>(low + 4 * high);  // value (low - (high ? 0 : 4)) * scale
  }
}

void decode_q45_k(const uint8_t* blk, bool five, Groups& g) {
  g.d = load_f16(blk);
  g.m = -load_f16(blk + 2);
  const uint8_t* scales = blk + 4;
  const uint8_t* qh = blk + 16;
  const uint8_t* qs = blk + (five ? 48 : 16);
  for (int s = 0; s < 8; ++s) {
    int sc = 0, m = 0;
    kquant_scale_min(scales, s, sc, m);
    g.s[s] = static_cast<int8_t>(sc);
    g.mi[s] = static_cast<int8_t>(m);
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
  g.d = load_f16(blk + 208);
  g.m = -32.0f * g.d;
  for (int s = 0; s < 16; ++s) g.s[s] = g.mi[s] = scales[s];
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
  g.d = load_f16(blk);
  g.m = -128.0f * g.d;
  uint16_t scales_h;
  std::memcpy(&scales_h, blk + 2, 2);
  for (int s = 0; s < 8; ++s) {
    const int ls = ((blk[4 + s / 2] >> (4 * (s % 2))) & 0x0f) | (((scales_h >> (2 * s)) & 3) << 4);
    g.s[s] = g.mi[s] = static_cast<int8_t>(ls - 32);
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
  DType wide, packed;  // the 8-bit form, and the form AffineWidth::kPacked uses
  void (*decode)(const uint8_t* blk, Groups& g);
};

constexpr Decoder kDecoders[] = {
    {ggml_type::kQ4_1, DType::kA8G32, DType::kA4G32, decode_q4_1},
    {ggml_type::kQ5_0, DType::kA8G32, DType::kA8G32, decode_q5_0},
    {ggml_type::kQ5_1, DType::kA8G32, DType::kA8G32, decode_q5_1},
    {ggml_type::kQ2_K, DType::kA8K16, DType::kA8K16, decode_q2_k},
    {ggml_type::kQ3_K, DType::kA8K16, DType::kA8K16, decode_q3_k},
    {ggml_type::kQ4_K, DType::kA8K32, DType::kA4K, decode_q4_k},
    {ggml_type::kQ5_K, DType::kA8K32, DType::kA8K32, decode_q5_k},
    {ggml_type::kQ6_K, DType::kA8K16, DType::kA8K16, decode_q6_k},
    {ggml_type::kIQ4_NL, DType::kA8G32, DType::kA4IQ4, decode_iq4_nl},
    {ggml_type::kIQ4_XS, DType::kA8K32, DType::kA4KIQ4, decode_iq4_xs},
    {ggml_type::kMXFP4, DType::kA8G32, DType::kA4MXFP4, decode_mxfp4},
};

const Decoder* decoder_for(uint32_t type) {
  for (const Decoder& d : kDecoders) {
    if (d.type == type) return &d;
  }
  return nullptr;
}

// The nibble tables: codes as the decoders above write them (IQ4: level + 128, MXFP4: level + 12).
struct NibbleTables {
  uint8_t linear[16], iq4[16], mxfp4[16];
  NibbleTables() {
    for (int n = 0; n < 16; ++n) {
      linear[n] = static_cast<uint8_t>(n);
      iq4[n] = static_cast<uint8_t>(kIq4Grid[n] + 128);
      mxfp4[n] = static_cast<uint8_t>(kMxfp4Grid[n] + 12);
    }
  }
};

const NibbleTables& nibble_tables() {
  static const NibbleTables t;
  return t;
}

// The nibble standing for `code` in table `lut` (the first, where two stand for one value:
// MXFP4's +0 and -0), or -1.
int nibble_of(const uint8_t* lut, uint8_t code) {
  for (int n = 0; n < 16; ++n) {
    if (lut[n] == code) return n;
  }
  return -1;
}

}  // namespace

const uint8_t* affine_nibble_codes(DType t) {
  const NibbleTables& n = nibble_tables();
  switch (t) {
    case DType::kA4G32:
    case DType::kA4K: return n.linear;
    case DType::kA4IQ4:
    case DType::kA4KIQ4: return n.iq4;
    case DType::kA4MXFP4: return n.mxfp4;
    default: break;
  }
  CHECK(false) << "affine rows: " << dtype_name(t) << " has no nibbles";
  return nullptr;
}

std::optional<DType> affine_dtype_for_ggml(uint32_t ggml_type, AffineWidth width) {
  const Decoder* d = decoder_for(ggml_type);
  if (d == nullptr) return std::nullopt;
  return width == AffineWidth::kPacked ? d->packed : d->wide;
}

bool affine_from_ggml(uint32_t ggml_type, DType t, const uint8_t* blocks, int64_t rows, int64_t cols, uint8_t* out) {
  const Decoder* dec = decoder_for(ggml_type);
  const GgmlBlockFormat* fmt = ggml_block_format(ggml_type);
  CHECK(dec != nullptr && fmt != nullptr) << "affine rows: ggml type " << ggml_type;
  CHECK(t == dec->wide || t == dec->packed) << "affine rows: " << fmt->name << " as " << dtype_name(t);
  CHECK(cols % kAffineBlock == 0 && cols % fmt->block_elems == 0) << "affine rows: cols " << cols;
  const bool nibbles = is_affine_nibbles(t), super = is_affine_super(t);
  CHECK(super == (fmt->block_elems == 256)) << "affine rows: " << fmt->name << " as " << dtype_name(t);
  const uint8_t* lut = nibbles ? affine_nibble_codes(t) : nullptr;
  const int64_t group = affine_group(t), per_block = affine_groups_per_block(t), code_bytes = affine_code_bytes(t);
  const int64_t src_groups = fmt->block_elems / group;  // groups per source block
  const int64_t row_bytes = dtype_row_bytes(t, cols);
  Groups g;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = out + r * row_bytes;
    for (int64_t k0 = 0; k0 < cols; k0 += fmt->block_elems) {
      dec->decode(blocks + (r * cols + k0) / fmt->block_elems * fmt->block_bytes, g);
      if (super && (!std::isfinite(g.d) || !std::isfinite(g.m))) return false;
      for (int64_t s = 0; s < src_groups; ++s) {
        if (!super && (!std::isfinite(g.scale[s]) || !std::isfinite(g.min[s]))) return false;
        const int64_t k = k0 + s * group;  // first column of this group
        const int64_t b = k / kAffineBlock, slot = k % kAffineBlock / group;
        uint8_t* blk = row + b * dtype_block_bytes(t);
        if (nibbles) {  // group `slot` of 32: bytes 16 slot .. +15, low then high nibbles
          for (int64_t e = 0; e < 16; ++e) {
            const int lo = nibble_of(lut, g.code[s * group + e]), hi = nibble_of(lut, g.code[s * group + 16 + e]);
            CHECK(lo >= 0 && hi >= 0) << "affine rows: " << fmt->name << " code without a nibble";
            blk[16 * slot + e] = static_cast<uint8_t>(lo | (hi << 4));
          }
        } else {
          std::memcpy(blk + k % kAffineBlock, g.code + s * group, static_cast<size_t>(group));
        }
        uint8_t* sb = blk + code_bytes;
        if (super) {  // D and M once per block (a 256-element source block spans two)
          std::memcpy(sb, &g.d, 4);
          std::memcpy(sb + 4, &g.m, 4);
          sb[8 + slot] = static_cast<uint8_t>(g.s[s]);
          sb[8 + per_block + slot] = static_cast<uint8_t>(g.mi[s]);
        } else {
          std::memcpy(sb + 4 * slot, &g.scale[s], 4);
          std::memcpy(sb + 4 * (per_block + slot), &g.min[s], 4);
        }
      }
    }
  }
  return true;
}

void affine_block_codes(DType t, const uint8_t* row, int64_t b, uint8_t* codes) {
  const uint8_t* src = affine_code_bytes_of(t, row, b);
  if (!is_affine_nibbles(t)) {
    std::memcpy(codes, src, kAffineBlock);
    return;
  }
  const uint8_t* lut = affine_nibble_codes(t);
  for (int j = 0; j < 4; ++j) {
    for (int e = 0; e < 16; ++e) {
      codes[32 * j + e] = lut[src[16 * j + e] & 0x0f];
      codes[32 * j + 16 + e] = lut[src[16 * j + e] >> 4];
    }
  }
}

void affine_block_scales(DType t, const uint8_t* row, int64_t b, float* scale, float* min) {
  const uint8_t* sb = affine_scale_bytes_of(t, row, b);
  const int64_t groups = affine_groups_per_block(t);
  if (!is_affine_super(t)) {
    std::memcpy(scale, sb, static_cast<size_t>(4 * groups));
    std::memcpy(min, sb + 4 * groups, static_cast<size_t>(4 * groups));
    return;
  }
  const float d = block_bytes::load_f32(sb), m = block_bytes::load_f32(sb + 4);
  for (int64_t g = 0; g < groups; ++g) {
    scale[g] = d * static_cast<float>(static_cast<int8_t>(sb[8 + g]));
    min[g] = m * static_cast<float>(static_cast<int8_t>(sb[8 + groups + g]));
  }
}

void affine_dequantize(DType t, const uint8_t* row, int64_t begin, int64_t count, float* out) {
  CHECK(is_affine_rows(t)) << "affine rows: dtype " << dtype_name(t);
  const int64_t group = affine_group(t);
  uint8_t codes[kAffineBlock];
  float scale[8], min[8];
  int64_t decoded = -1;  // the block `codes`, `scale` and `min` hold
  for (int64_t k = begin; k < begin + count; ++k) {
    const int64_t b = k / kAffineBlock;
    if (b != decoded) {
      affine_block_codes(t, row, b, codes);
      affine_block_scales(t, row, b, scale, min);
      decoded = b;
    }
    const int64_t g = k % kAffineBlock / group;
    out[k - begin] = std::fmaf(scale[g], static_cast<float>(codes[k % kAffineBlock]), min[g]);
  }
}

}  // namespace densa
