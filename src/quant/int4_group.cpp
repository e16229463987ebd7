#include "quant/int4_group.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"

namespace densa {

void int4_group_quantize(const float* w, int64_t rows, int64_t cols, int64_t group,
                         std::span<uint8_t> packed, std::span<uint16_t> scales) {
  CHECK(group > 0 && group % 2 == 0 && cols % group == 0) << "int4: group " << group << ", cols " << cols;
  CHECK(static_cast<int64_t>(packed.size()) == rows * cols / 2);
  CHECK(static_cast<int64_t>(scales.size()) == rows * (cols / group));
  const int64_t groups = cols / group;
  for (int64_t r = 0; r < rows; ++r) {
    const float* wr = w + r * cols;
    uint8_t* pr = packed.data() + r * cols / 2;
    for (int64_t g = 0; g < groups; ++g) {
      float amax = 0.0f;
      for (int64_t j = g * group; j < (g + 1) * group; ++j) amax = std::max(amax, std::fabs(wr[j]));
      // Round the scale first, then quantize against the rounded value: the stored bf16 scale
      // is exactly what the values were quantized with.
      const uint16_t scale_bf16 = f32_to_bf16(amax / static_cast<float>(kInt4Max));
      const float scale = bf16_to_f32(scale_bf16);
      scales[static_cast<size_t>(r * groups + g)] = scale_bf16;
      for (int64_t j = g * group; j < (g + 1) * group; j += 2) {
        uint8_t nib[2];
        for (int t = 0; t < 2; ++t) {
          // nearbyint rounds half to even in the default rounding mode.
          const float q = scale > 0.0f ? std::nearbyint(wr[j + t] / scale) : 0.0f;
          nib[t] = static_cast<uint8_t>(static_cast<int>(std::clamp(q, -8.0f, 7.0f)) + kInt4Offset);
        }
        pr[j / 2] = static_cast<uint8_t>(nib[0] | (nib[1] << 4));
      }
    }
  }
}

WeightView int4_group_view(const uint8_t* packed, const uint16_t* scales, int64_t rows, int64_t cols,
                           int64_t group) {
  WeightView v;
  v.dtype = DType::kI4;
  v.rows = rows;
  v.cols = cols;
  v.data = packed;
  v.scales_bf16 = scales;
  v.scale_rows = 1;
  v.scale_cols = group;
  return v;
}

void int4_group_from_q4_0(const uint8_t* q4_0, int64_t rows, int64_t cols, std::span<uint8_t> packed,
                          std::span<uint16_t> scales_f16) {
  constexpr int64_t kBlock = 32, kBlockBytes = 18;
  CHECK(cols % kBlock == 0) << "int4 from q4_0: cols " << cols;
  CHECK(static_cast<int64_t>(packed.size()) == rows * cols / 2);
  CHECK(static_cast<int64_t>(scales_f16.size()) == rows * (cols / kBlock));
  const int64_t blocks = rows * cols / kBlock;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* in = q4_0 + b * kBlockBytes;
    std::memcpy(&scales_f16[static_cast<size_t>(b)], in, 2);  // rows are whole blocks: block b is group b
    const uint8_t* qs = in + 2;
    uint8_t* out = packed.data() + b * (kBlock / 2);
    for (int j = 0; j < kBlock / 2; ++j) {
      // Output byte j holds elements 2j and 2j + 1; element e < 16 is qs[e] low, else qs[e - 16] high.
      auto nibble = [qs](int e) { return e < 16 ? qs[e] & 0x0f : qs[e - 16] >> 4; };
      out[j] = static_cast<uint8_t>(nibble(2 * j) | (nibble(2 * j + 1) << 4));
    }
  }
}

WeightView int4_group_view_f16(const uint8_t* packed, const uint16_t* scales_f16, int64_t rows, int64_t cols) {
  WeightView v = int4_group_view(packed, nullptr, rows, cols, 32);
  v.scales_f16 = scales_f16;
  return v;
}

bool int4_group_tileable(const WeightView& w) {
  return w.dtype == DType::kI4 && w.layout == WeightLayout::kRows && w.data != nullptr &&
         (w.scales_bf16 == nullptr) != (w.scales_f16 == nullptr) && w.scale_rows == 1 && w.scale_cols == 32 &&
         w.rows > 0 && w.rows % kInt4TileRows == 0 && w.cols > 0 && w.cols % kInt4TileCols == 0;
}

WeightView int4_group_tile8(const WeightView& w, std::span<uint8_t> tiles) {
  CHECK(int4_group_tileable(w)) << "int4 tiles: " << w.rows << "x" << w.cols << " g" << w.scale_cols;
  CHECK(static_cast<int64_t>(tiles.size()) == int4_group_tile8_bytes(w));
  CHECK(reinterpret_cast<uintptr_t>(tiles.data()) % 64 == 0) << "int4 tiles: unaligned destination";
  constexpr int64_t kCodeBytes = kInt4TileCols / 2, kScales = kInt4TileCols / 32;
  const int64_t chunks = w.cols / kInt4TileCols, groups = w.cols / 32;
  const uint16_t* scales = w.scales_f16 != nullptr ? w.scales_f16 : w.scales_bf16;
  uint8_t* out = tiles.data();
  for (int64_t r0 = 0; r0 < w.rows; r0 += kInt4TileRows) {
    for (int64_t c = 0; c < chunks; ++c, out += kInt4TileChunkBytes) {
      for (int64_t r = 0; r < kInt4TileRows; ++r) {
        std::memcpy(out + r * kCodeBytes, w.row_ptr(r0 + r) + c * kCodeBytes, kCodeBytes);
        std::memcpy(out + kInt4TileRows * kCodeBytes + r * 2 * kScales, scales + (r0 + r) * groups + c * kScales,
                    2 * kScales);
      }
    }
  }
  return int4_group_tiled_view(w, tiles.data());
}

WeightView int4_group_tiled_view(const WeightView& w, const uint8_t* tiles) {
  WeightView t = w;
  t.layout = WeightLayout::kInt4Tiles8;
  t.data = tiles;
  const auto* first_scale = reinterpret_cast<const uint16_t*>(tiles + kInt4TileRows * kInt4TileCols / 2);
  (w.scales_f16 != nullptr ? t.scales_f16 : t.scales_bf16) = first_scale;
  return t;
}

std::optional<WeightLayout> int4_layout_from_name(std::string_view name) {
  if (name == "rows") return WeightLayout::kRows;
  if (name == "tiles8") return WeightLayout::kInt4Tiles8;
  if (name == "tiles16") return WeightLayout::kInt4Tiles16;
  return std::nullopt;
}

bool int4_group_tileable16(const WeightView& w) { return int4_group_tileable(w) && w.rows % kInt4Tile16Rows == 0; }

WeightView int4_group_tile16(const WeightView& w, std::span<uint8_t> tiles) {
  CHECK(int4_group_tileable16(w)) << "int4 16-row tiles: " << w.rows << "x" << w.cols << " g" << w.scale_cols;
  CHECK(static_cast<int64_t>(tiles.size()) == int4_group_tile8_bytes(w));
  CHECK(reinterpret_cast<uintptr_t>(tiles.data()) % 64 == 0) << "int4 16-row tiles: unaligned destination";
  const int64_t chunks = w.cols / kInt4Tile16Cols, groups = w.cols / 32;
  const uint16_t* scales = w.scales_f16 != nullptr ? w.scales_f16 : w.scales_bf16;
  uint8_t* out = tiles.data();
  for (int64_t r0 = 0; r0 < w.rows; r0 += kInt4Tile16Rows) {
    for (int64_t c = 0; c < chunks; ++c, out += kInt4Tile16ChunkBytes) {
      for (int64_t g = 0; g < 4; ++g) {
        uint8_t* group = out + g * kInt4Tile16GroupBytes;
        for (int64_t r = 0; r < kInt4Tile16Rows; ++r) {
          const uint8_t* row = w.row_ptr(r0 + r) + (c * 4 + g) * 16;  // the group's 16 bytes, row-major
          const auto nibble = [row](int64_t e) { return (row[e / 2] >> (4 * (e % 2))) & 0x0f; };
          for (int64_t e = 0; e < 16; ++e) {
            group[e / 4 * 64 + r * 4 + e % 4] = static_cast<uint8_t>(nibble(e) | nibble(e + 16) << 4);
          }
          std::memcpy(out + 4 * kInt4Tile16GroupBytes + g * 32 + r * 2, scales + (r0 + r) * groups + c * 4 + g, 2);
        }
      }
    }
  }
  return int4_group_tiled16_view(w, tiles.data());
}

WeightView int4_group_tiled16_view(const WeightView& w, const uint8_t* tiles) {
  WeightView t = w;
  t.layout = WeightLayout::kInt4Tiles16;
  t.data = tiles;
  const auto* first_scale = reinterpret_cast<const uint16_t*>(tiles + 4 * kInt4Tile16GroupBytes);
  (w.scales_f16 != nullptr ? t.scales_f16 : t.scales_bf16) = first_scale;
  return t;
}

void int4_group_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out) {
  DCHECK(w.dtype == DType::kI4 && (w.scales_bf16 != nullptr || w.scales_f16 != nullptr) && w.scale_cols > 0 &&
         begin % 2 == 0);
  const int64_t end = begin + count;
  for (int64_t j = begin; j < end;) {
    // Elements j .. stop - 1 share a group and its scale.
    const int64_t stop = std::min(end, (j / w.scale_cols + 1) * w.scale_cols);
    const float scale = int4_group_scale(w, row, j / w.scale_cols);
    for (int64_t k = j; k < stop; ++k) {
      out[k - begin] = static_cast<float>(int4_group_nibble(w, row, k) - kInt4Offset) * scale;
    }
    j = stop;
  }
}

}  // namespace densa
