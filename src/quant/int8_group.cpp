#include "quant/int8_group.h"

#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace densa {

void int8_group_from_q8_0(const uint8_t* q8_0, int64_t rows, int64_t cols, std::span<uint8_t> codes,
                          std::span<uint16_t> scales_f16) {
  constexpr int64_t kBlock = 32, kBlockBytes = 34;
  CHECK(cols % kBlock == 0) << "int8 from q8_0: cols " << cols;
  CHECK(static_cast<int64_t>(codes.size()) == rows * cols);
  CHECK(static_cast<int64_t>(scales_f16.size()) == rows * (cols / kBlock));
  const int64_t blocks = rows * cols / kBlock;
  for (int64_t b = 0; b < blocks; ++b) {  // rows are whole blocks: block b is group b
    const uint8_t* in = q8_0 + b * kBlockBytes;
    std::memcpy(&scales_f16[static_cast<size_t>(b)], in, 2);
    std::memcpy(codes.data() + b * kBlock, in + 2, kBlock);
  }
}

WeightView int8_group_view_f16(const uint8_t* codes, const uint16_t* scales_f16, int64_t rows, int64_t cols) {
  return WeightView{.dtype = DType::kI8, .rows = rows, .cols = cols, .data = codes, .scales_f16 = scales_f16,
                    .scale_rows = 1, .scale_cols = 32};
}

bool int8_group_tileable(const WeightView& w) {
  return w.dtype == DType::kI8 && w.layout == WeightLayout::kRows && w.data != nullptr && w.scales_f16 != nullptr &&
         w.scale_rows == 1 && w.scale_cols == 32 && w.rows % kInt8TileRows == 0 && w.cols % kInt8TileCols == 0;
}

WeightView int8_group_tiled_view(const WeightView& w, const uint8_t* tiles) {
  WeightView t = w;
  t.layout = WeightLayout::kInt8Tiles16;
  t.data = tiles;
  t.scales_f16 = reinterpret_cast<const uint16_t*>(tiles + 4 * kInt8TileGroupBytes);
  return t;
}

namespace {

// Byte offsets in the tile layout of row `row`'s element k, and of its group g's scale.
int64_t tile_code_at(const WeightView& w, int64_t row, int64_t k) {
  const int64_t chunks = w.cols / kInt8TileCols, c = k / kInt8TileCols, g = k % kInt8TileCols / 32, kk = k % 32;
  return (row / kInt8TileRows * chunks + c) * kInt8TileChunkBytes + g * kInt8TileGroupBytes + kk / 4 * 64 +
         row % kInt8TileRows * 4 + kk % 4;
}

int64_t tile_scale_at(const WeightView& w, int64_t row, int64_t g) {
  const int64_t chunks = w.cols / kInt8TileCols, c = g / 4;
  return (row / kInt8TileRows * chunks + c) * kInt8TileChunkBytes + 4 * kInt8TileGroupBytes +
         (g % 4 * kInt8TileRows + row % kInt8TileRows) * 2;
}

}  // namespace

WeightView int8_group_tile16(const WeightView& w, std::span<uint8_t> tiles) {
  CHECK(int8_group_tileable(w)) << "int8 tiles: " << w.rows << "x" << w.cols;
  CHECK(static_cast<int64_t>(tiles.size()) == int8_group_tile16_bytes(w));
  CHECK(reinterpret_cast<uintptr_t>(tiles.data()) % 64 == 0) << "int8 tiles: unaligned destination";
  // Written in the tiles' own order (one pass over the destination, 4-byte runs of codes),
  // not element by element through tile_code_at: this runs at load for every Q8_0 matrix.
  const int64_t groups = w.cols / 32, chunks = w.cols / kInt8TileCols;
  uint8_t* out = tiles.data();
  for (int64_t r0 = 0; r0 < w.rows; r0 += kInt8TileRows) {
    for (int64_t c = 0; c < chunks; ++c, out += kInt8TileChunkBytes) {
      for (int64_t g = 0; g < 4; ++g) {
        for (int64_t r = 0; r < kInt8TileRows; ++r) {
          const uint8_t* src = w.row_ptr(r0 + r) + c * kInt8TileCols + g * 32;
          uint8_t* dst = out + g * kInt8TileGroupBytes + r * 4;
          for (int64_t k = 0; k < 32; ++k) dst[k / 4 * 64 + k % 4] = src[k] ^ 0x80;  // code + 128
          std::memcpy(out + 4 * kInt8TileGroupBytes + (g * kInt8TileRows + r) * 2,
                      w.scales_f16 + (r0 + r) * groups + c * 4 + g, 2);
        }
      }
    }
  }
  return int8_group_tiled_view(w, tiles.data());
}

int8_t int8_group_code(const WeightView& w, int64_t row, int64_t k) {
  if (w.layout == WeightLayout::kInt8Tiles16) {
    return static_cast<int8_t>(static_cast<const uint8_t*>(w.data)[tile_code_at(w, row, k)] ^ 0x80);
  }
  return static_cast<int8_t>(w.row_ptr(row)[k]);
}

float int8_group_scale(const WeightView& w, int64_t row, int64_t g) {
  if (w.layout == WeightLayout::kInt8Tiles16) {
    uint16_t s;
    std::memcpy(&s, static_cast<const uint8_t*>(w.data) + tile_scale_at(w, row, g), 2);
    return f16_to_f32(s);
  }
  return f16_to_f32(w.scales_f16[row * (w.cols / w.scale_cols) + g]);
}

void int8_group_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out) {
  CHECK(w.dtype == DType::kI8 && w.scales_f16 != nullptr && w.scale_cols > 0) << "int8 weights need f16 group scales";
  for (int64_t j = begin; j < begin + count; ++j) {
    out[j - begin] = static_cast<float>(int8_group_code(w, row, j)) * int8_group_scale(w, row, j / w.scale_cols);
  }
}

}  // namespace densa
