#pragma once
// Affine rows (quant/affine_rows.h) in 16-row tiles (WeightLayout::kAffineTiles16): the same
// bytes as 16 consecutive rows, reordered so that one 16-row tile of one 32-column group is an
// AMX-INT8 B tile and eight vpdpbusd operands with one output row per 32-bit lane. The values
// are unchanged; the kernels of this layout sum each group exactly (kernels/internal/matmul_affine.h).
//
// A matrix is rows / 16 tiles, each cols / 128 blocks of 16 * dtype_block_bytes(t) bytes (the
// tile takes exactly the bytes of its 16 rows). Within a block, for tile row r (0-15):
//   codes, 8-bit types: group j (32 columns, j < 4) at byte 512 j; row r's code of column
//     32 j + k at 512 j + (k / 4) * 64 + r * 4 + k % 4
//   codes, 4-bit types: group j at byte 256 j; the byte at 256 j + (e / 4) * 64 + r * 4 + e % 4
//     (e < 16) holds column 32 j + e in its low nibble and 32 j + 16 + e in its high nibble (the
//     row layout's byte 16 j + e of that row), so the low nibbles of a group's 256 bytes are the
//     first half of the 8-bit layout's 512 and the high nibbles the second half
//   then, at byte 16 * affine_code_bytes(t): per-group types, fp32 scale[j][r] (j < 4), then
//     fp32 min[j][r]; K-quant types, fp32 D[r], fp32 M[r], int8 s[g][r], int8 m[g][r] (g < 8
//     for kA8K16, else 4).
#include <cstdint>
#include <span>

#include "core/tensor_view.h"

namespace densa {

inline constexpr int64_t kAffineTileRows = 16;

// Whether w (affine rows, row-major) can be laid out in 16-row tiles: rows % 16 == 0.
bool affine_tileable(const WeightView& w);

// A view of w's matrix held in the tile layout at `tiles` (w's dtype and shape).
WeightView affine_tiled_view(const WeightView& w, const uint8_t* tiles);

// Copies w (affine_tileable) into `tiles` (w.bytes() bytes, 64-byte aligned) in the tile layout
// and returns the view over them.
WeightView affine_tile16(const WeightView& w, std::span<uint8_t> tiles);

// Rewrites w's own bytes (affine_tileable; `data` is w.data, writable) into the tile layout,
// 16 rows at a time through a small buffer, and returns the tiled view of them. No second copy
// of the matrix is made.
WeightView affine_tile16_in_place(const WeightView& w, uint8_t* data);

// Row `row`'s block `b` as the row layout holds it (dtype_block_bytes(w.dtype) bytes), from
// either layout: what affine_block_codes / affine_block_scales read.
void affine_row_block(const WeightView& w, int64_t row, int64_t b, uint8_t* block);

// affine_dequantize of columns [begin, begin + count) of row `row`, from either layout.
void affine_view_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out);

}  // namespace densa
