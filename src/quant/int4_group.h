#pragma once
// Symmetric group-wise INT4 weights (W4A16), the compressed-tensors `pack-quantized` format.
// Each row is cut into groups of `group` consecutive input elements (32 or 128; group must
// divide cols). Per group: s = bf16(amax(|group|) / 7), q = clamp(round_half_even(w / s), -8, 7),
// value = q * s. Dividing by 7 (not 7.5 or 8) means no element is clipped: |q| <= 7 for every
// element this quantizer writes (bf16 rounding of s moves amax / s by < 2^-8, far from 7.5);
// -8 stays decodable so checkpoints from other tools that use it load unchanged. The scale is
// rounded to bf16 first and the values are quantized against the rounded scale, so the stored
// scale is exactly the one they were quantized with. BF16 is what the checkpoints store (2 bytes
// per group: 4.5 bits per weight at g32) and what densa keeps in memory, so a written checkpoint
// reloads with exactly these bits and no conversion.
//
// Packing (kI4 rows, cols / 2 bytes): byte k holds element 2k in its low nibble and element
// 2k+1 in its high nibble, each as q + 8 (offset binary). Read as little-endian int32 words this
// is exactly compressed-tensors' `weight_packed` [rows, cols / 8]: nibble i of word j is
// element 8j + i. Scales are bf16 bits in memory (WeightView::scales_bf16), [rows, cols / group]
// row-major, as compressed-tensors' `weight_scale` BF16 [rows, cols / group].
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/dtype.h"
#include "core/tensor_view.h"

namespace densa {

inline constexpr int kInt4Max = 7;
inline constexpr int kInt4Offset = 8;

// Quantizes w [rows, cols] (row-major fp32) into packed [rows * cols / 2] bytes and
// scales [rows * cols / group] (bf16 bits). Precondition: cols % group == 0, group even.
void int4_group_quantize(const float* w, int64_t rows, int64_t cols, int64_t group,
                         std::span<uint8_t> packed, std::span<uint16_t> scales);

// A WeightView over INT4 group-wise storage (packed and bf16 scales as written above).
WeightView int4_group_view(const uint8_t* packed, const uint16_t* scales, int64_t rows, int64_t cols,
                           int64_t group);

// GGUF Q4_0 repacked into this layout at g32, without changing a value: a Q4_0 block is an f16
// scale d and 16 bytes where byte j holds element j (low nibble) and element j + 16 (high
// nibble), each as q + 8, value (nibble - 8) * d. That is this format's offset and value grid,
// so only the nibble order changes; d stays f16 (scales_f16) because not every f16 is exact in
// bf16. Both layouts take 18 bytes per 32 weights. `q4_0` holds rows * cols / 32 blocks.
// Precondition: cols % 32 == 0.
void int4_group_from_q4_0(const uint8_t* q4_0, int64_t rows, int64_t cols, std::span<uint8_t> packed,
                          std::span<uint16_t> scales_f16);

// A WeightView over INT4 g32 storage with f16 scales (as int4_group_from_q4_0 writes).
WeightView int4_group_view_f16(const uint8_t* packed, const uint16_t* scales_f16, int64_t rows, int64_t cols);

// The 8-row tile layout (WeightLayout::kInt4Tiles8, described in core/tensor_view.h).
inline constexpr int64_t kInt4TileRows = 8;
inline constexpr int64_t kInt4TileCols = 128;
inline constexpr int64_t kInt4TileChunkBytes = kInt4TileRows * (kInt4TileCols / 2 + 2 * kInt4TileCols / 32);  // 576

// Whether w (INT4 g32, row-major, either scale format) can be laid out in 8-row tiles.
bool int4_group_tileable(const WeightView& w);

// Bytes of w's codes and scales together: what int4_group_tile8 writes.
inline int64_t int4_group_tile8_bytes(const WeightView& w) { return w.bytes() + w.scale_bytes(); }

// A view of w's matrix held in the 8-row tile layout at `tiles`: w's shape and scale format,
// data = tiles, the scale pointer at the first tile's scales.
WeightView int4_group_tiled_view(const WeightView& w, const uint8_t* tiles);

// Copies w (int4_group_tileable) into `tiles` (int4_group_tile8_bytes(w) bytes, 64-byte
// aligned for the kernel's aligned loads) in the 8-row tile layout and returns the view over
// them: the same values, the same scale format.
WeightView int4_group_tile8(const WeightView& w, std::span<uint8_t> tiles);

// The 16-row tile layout (WeightLayout::kInt4Tiles16, described in core/tensor_view.h): the
// INT8 16-row tiles' VNNI order (quant/int8_group.h) at 4 bits, so that AMX-INT8 and VNNI run
// the same exact group sums. Per 16 rows and group, 256 bytes: byte m * 64 + r * 4 + k % 4 holds
// row r's group element k = 4 m + k % 4 (m < 4) in its low nibble and element k + 16 in its high
// nibble, each as q + 8; per 4 groups the 16 rows' scales after them (group g's at 1024 + 32 g).
inline constexpr int64_t kInt4Tile16Rows = 16;
inline constexpr int64_t kInt4Tile16Cols = 128;
inline constexpr int64_t kInt4Tile16GroupBytes = kInt4Tile16Rows * 16;  // 256
inline constexpr int64_t kInt4Tile16ChunkBytes = 4 * kInt4Tile16GroupBytes + 4 * kInt4Tile16Rows * 2;  // 1152

// The INT4 layout a user names (--int4-layout, densa eval's +int4-): "rows", "tiles8" or
// "tiles16"; nullopt for any other name.
std::optional<WeightLayout> int4_layout_from_name(std::string_view name);

// Whether w (INT4 g32, row-major, either scale format) can be laid out in 16-row tiles.
bool int4_group_tileable16(const WeightView& w);

// Copies w (int4_group_tileable16) into `tiles` (int4_group_tile8_bytes(w) bytes: the same
// count, 64-byte aligned) in the 16-row tile layout and returns the view over them.
WeightView int4_group_tile16(const WeightView& w, std::span<uint8_t> tiles);

// A view of w's matrix held in the 16-row tile layout at `tiles` (as int4_group_tiled_view).
WeightView int4_group_tiled16_view(const WeightView& w, const uint8_t* tiles);

// Row `row`'s element k as stored (q + 8, 0..15), in any layout.
inline int int4_group_nibble(const WeightView& w, int64_t row, int64_t k) {
  if (w.layout == WeightLayout::kInt4Tiles16) {
    const int64_t chunks = w.cols / kInt4Tile16Cols, g = k / 32, e = k % 32;
    const uint8_t* group = static_cast<const uint8_t*>(w.data) +
                           (row / kInt4Tile16Rows * chunks + g / 4) * kInt4Tile16ChunkBytes + g % 4 * kInt4Tile16GroupBytes;
    const uint8_t b = group[(e % 16) / 4 * 64 + row % kInt4Tile16Rows * 4 + e % 4];
    return e < 16 ? b & 0x0f : b >> 4;
  }
  const uint8_t* p;
  if (w.layout == WeightLayout::kRows) {
    p = w.row_ptr(row) + k / 2;
  } else {
    const int64_t chunks = w.cols / kInt4TileCols, c = k / kInt4TileCols;
    p = static_cast<const uint8_t*>(w.data) + (row / kInt4TileRows * chunks + c) * kInt4TileChunkBytes +
        row % kInt4TileRows * (kInt4TileCols / 2) + k / 2 % (kInt4TileCols / 2);
  }
  return (*p >> (4 * (k % 2))) & 0x0f;
}

// The scale of group `group` of row `row`, from bf16 or f16 storage, as fp32 (exact).
inline float int4_group_scale(const WeightView& w, int64_t row, int64_t group) {
  int64_t at = row * (w.cols / w.scale_cols) + group;
  if (w.layout == WeightLayout::kInt4Tiles8) {  // inside the tiles, counted from the first scale
    constexpr int64_t kPerChunk = kInt4TileCols / 32;
    const int64_t chunks = w.cols / kInt4TileCols, c = group / kPerChunk;
    at = ((row / kInt4TileRows * chunks + c) * kInt4TileChunkBytes +
          (row % kInt4TileRows * kPerChunk + group % kPerChunk) * 2) / 2;
  } else if (w.layout == WeightLayout::kInt4Tiles16) {
    const int64_t chunks = w.cols / kInt4Tile16Cols, c = group / 4;
    at = ((row / kInt4Tile16Rows * chunks + c) * kInt4Tile16ChunkBytes + group % 4 * 32 +
          row % kInt4Tile16Rows * 2) / 2;
  }
  return w.scales_f16 != nullptr ? f16_to_f32(w.scales_f16[at]) : bf16_to_f32(w.scales_bf16[at]);
}

// Reference dequantization of elements [begin, begin + count) of row `row` (begin even), in
// any layout:
// out[j] = (nibble - 8) * scale of the element's group.
void int4_group_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out);

}  // namespace densa
