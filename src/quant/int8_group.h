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

// Reference dequantization of elements [begin, begin + count) of row `row`:
// out[j] = int8 code * f16 scale of the element's group.
void int8_group_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out);

}  // namespace densa
