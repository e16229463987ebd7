#pragma once
// Group-wise INT8 weights with f16 scales: GGUF Q8_0 repacked at load for the W8A8 kernel.
// A Q8_0 block is an f16 scale d and 32 int8 values, value q * d; repacking only moves the
// scales out of the rows, so the codes are 32-byte runs of a plain [rows, cols] int8 matrix
// (kI8 rows, cols bytes) and the scales an [rows, cols / 32] f16 array
// (WeightView::scales_f16, scale_rows 1, scale_cols 32). 34 bytes per 32 weights either way.
#include <cstdint>
#include <span>

#include "core/tensor_view.h"

namespace densa {

// `q8_0` holds rows * cols / 32 blocks. Precondition: cols % 32 == 0.
void int8_group_from_q8_0(const uint8_t* q8_0, int64_t rows, int64_t cols, std::span<uint8_t> codes,
                          std::span<uint16_t> scales_f16);

WeightView int8_group_view_f16(const uint8_t* codes, const uint16_t* scales_f16, int64_t rows, int64_t cols);

// The 16-row tile layout (WeightLayout::kInt8Tiles16, described in core/tensor_view.h).
inline constexpr int64_t kInt8TileRows = 16;
inline constexpr int64_t kInt8TileCols = 128;
inline constexpr int64_t kInt8TileGroupBytes = kInt8TileRows * 32;  // 512: one group's codes
inline constexpr int64_t kInt8TileChunkBytes = 4 * kInt8TileGroupBytes + 4 * kInt8TileRows * 2;  // 2176

// Whether w (INT8 g32, f16 scales, row-major) can be laid out in 16-row tiles.
bool int8_group_tileable(const WeightView& w);

// Bytes of w's codes and scales together: what int8_group_tile16 writes.
inline int64_t int8_group_tile16_bytes(const WeightView& w) { return w.bytes() + w.scale_bytes(); }

// A view of w's matrix held in the 16-row tile layout at `tiles` (w's shape).
WeightView int8_group_tiled_view(const WeightView& w, const uint8_t* tiles);

// Copies w (int8_group_tileable) into `tiles` (int8_group_tile16_bytes(w) bytes, 64-byte
// aligned) in the 16-row tile layout and returns the view over them: the same values.
WeightView int8_group_tile16(const WeightView& w, std::span<uint8_t> tiles);

// Row `row`'s code of element k, and the scale of its group `g` (fp32, exact), in either layout.
int8_t int8_group_code(const WeightView& w, int64_t row, int64_t k);
float int8_group_scale(const WeightView& w, int64_t row, int64_t g);

// Reference dequantization of elements [begin, begin + count) of row `row`, in either layout:
// out[j] = int8 code * f16 scale of the element's group.
void int8_group_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out);

}  // namespace densa
