#include "quant/affine_tiles.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "quant/affine_rows.h"

namespace densa {
namespace {

// Calls copy(row_offset, tile_offset, bytes) for every run of bytes of one row's block (offsets
// into the row's block and into the tile's block, for tile row r): the mapping described in
// affine_tiles.h, used in both directions.
template <typename Copy>
void for_each_run(DType t, int64_t r, Copy&& copy) {
  const int64_t code_bytes = affine_code_bytes(t), s0 = kAffineTileRows * code_bytes;
  if (is_affine_nibbles(t)) {
    for (int64_t j = 0; j < 4; ++j) {
      for (int64_t e4 = 0; e4 < 4; ++e4) copy(16 * j + 4 * e4, 256 * j + 64 * e4 + 4 * r, 4);
    }
  } else {
    for (int64_t j = 0; j < 4; ++j) {
      for (int64_t k4 = 0; k4 < 8; ++k4) copy(32 * j + 4 * k4, 512 * j + 64 * k4 + 4 * r, 4);
    }
  }
  const int64_t groups = affine_groups_per_block(t);
  if (!is_affine_super(t)) {
    for (int64_t j = 0; j < groups; ++j) {
      copy(code_bytes + 4 * j, s0 + 4 * (16 * j + r), 4);                         // scale
      copy(code_bytes + 4 * (groups + j), s0 + 256 + 4 * (16 * j + r), 4);        // min
    }
    return;
  }
  copy(code_bytes, s0 + 4 * r, 4);            // D
  copy(code_bytes + 4, s0 + 64 + 4 * r, 4);   // M
  for (int64_t g = 0; g < groups; ++g) {
    copy(code_bytes + 8 + g, s0 + 128 + 16 * g + r, 1);                          // s
    copy(code_bytes + 8 + groups + g, s0 + 128 + 16 * (groups + g) + r, 1);      // m
  }
}

// Writes the 16 rows at `rows` (row layout, row_bytes each) as one tile band at `out`.
void tile_band(DType t, int64_t blocks, int64_t row_bytes, const uint8_t* rows, uint8_t* out) {
  const int64_t block_bytes = dtype_block_bytes(t), tile_block = kAffineTileRows * block_bytes;
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* dst = out + b * tile_block;
    for (int64_t r = 0; r < kAffineTileRows; ++r) {
      const uint8_t* src = rows + r * row_bytes + b * block_bytes;
      for_each_run(t, r, [&](int64_t so, int64_t to, int64_t n) { std::memcpy(dst + to, src + so, static_cast<size_t>(n)); });
    }
  }
}

}  // namespace

bool affine_tileable(const WeightView& w) {
  return is_affine_rows(w.dtype) && w.layout == WeightLayout::kRows && w.data != nullptr &&
         w.rows % kAffineTileRows == 0 && w.cols % kAffineBlock == 0 && w.rows > 0;
}

WeightView affine_tiled_view(const WeightView& w, const uint8_t* tiles) {
  WeightView t = w;
  t.layout = WeightLayout::kAffineTiles16;
  t.data = tiles;
  return t;
}

WeightView affine_tile16(const WeightView& w, std::span<uint8_t> tiles) {
  CHECK(affine_tileable(w)) << "affine tiles: " << dtype_name(w.dtype) << " " << w.rows << "x" << w.cols;
  CHECK(static_cast<int64_t>(tiles.size()) == w.bytes()) << "affine tiles: buffer of " << tiles.size() << " bytes";
  CHECK(reinterpret_cast<uintptr_t>(tiles.data()) % 64 == 0) << "affine tiles: unaligned destination";
  const int64_t band = kAffineTileRows * w.row_bytes(), blocks = w.cols / kAffineBlock;
  for (int64_t r0 = 0; r0 < w.rows; r0 += kAffineTileRows) {
    tile_band(w.dtype, blocks, w.row_bytes(), w.row_ptr(r0), tiles.data() + r0 / kAffineTileRows * band);
  }
  return affine_tiled_view(w, tiles.data());
}

WeightView affine_tile16_in_place(const WeightView& w, uint8_t* data) {
  CHECK(affine_tileable(w) && data == w.data) << "affine tiles in place: " << dtype_name(w.dtype) << " " << w.rows
                                              << "x" << w.cols;
  // A band of 16 rows occupies exactly the bytes of its tile: copy it aside, write the tile back.
  const int64_t band = kAffineTileRows * w.row_bytes(), blocks = w.cols / kAffineBlock;
  std::vector<uint8_t> rows(static_cast<size_t>(band));
  for (int64_t r0 = 0; r0 < w.rows; r0 += kAffineTileRows) {
    uint8_t* at = data + r0 * w.row_bytes();
    std::memcpy(rows.data(), at, static_cast<size_t>(band));
    tile_band(w.dtype, blocks, w.row_bytes(), rows.data(), at);
  }
  return affine_tiled_view(w, data);
}

void affine_row_block(const WeightView& w, int64_t row, int64_t b, uint8_t* block) {
  CHECK(is_affine_rows(w.dtype)) << "affine block: dtype " << dtype_name(w.dtype);
  const int64_t block_bytes = dtype_block_bytes(w.dtype);
  if (w.layout != WeightLayout::kAffineTiles16) {
    std::memcpy(block, w.row_ptr(row) + b * block_bytes, static_cast<size_t>(block_bytes));
    return;
  }
  const int64_t blocks = w.cols / kAffineBlock, tile_block = kAffineTileRows * block_bytes;
  const uint8_t* src = static_cast<const uint8_t*>(w.data) + (row / kAffineTileRows * blocks + b) * tile_block;
  for_each_run(w.dtype, row % kAffineTileRows,
               [&](int64_t so, int64_t to, int64_t n) { std::memcpy(block + so, src + to, static_cast<size_t>(n)); });
}

void affine_view_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out) {
  if (w.layout != WeightLayout::kAffineTiles16) return affine_dequantize(w.dtype, w.row_ptr(row), begin, count, out);
  // One block at a time, through the row layout's bytes.
  uint8_t block[256];
  const int64_t block_bytes = dtype_block_bytes(w.dtype);
  CHECK(block_bytes <= static_cast<int64_t>(sizeof(block))) << "affine block of " << block_bytes << " bytes";
  for (int64_t k = begin; k < begin + count;) {
    const int64_t b = k / kAffineBlock, end = std::min(begin + count, (b + 1) * kAffineBlock);
    affine_row_block(w, row, b, block);
    // The block as a one-block row: columns k - b * 128 ...
    affine_dequantize(w.dtype, block, k - b * kAffineBlock, end - k, out + (k - begin));
    k = end;
  }
}

}  // namespace densa
