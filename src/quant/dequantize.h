#pragma once
// Reference dequantization of weight rows to fp32 (the oracle every fast kernel and every
// quantizer is tested against). Supports every dtype a WeightView can hold as a matrix:
// F32, F16, BF16, Q8_0, Q4_0, FP8 e4m3 block-scaled (quant/fp8_block.h) and INT4 group-wise
// (quant/int4_group.h).
#include <cstdint>

#include "core/tensor_view.h"

namespace densa {

// out: [w.cols]
void dequantize_row(const WeightView& w, int64_t row, float* out);

// Elements [begin, begin + count) of row `row`; out: [count]. For Q8_0/Q4_0 begin and count
// must be multiples of 32, for INT4 multiples of 2.
void dequantize_row_range(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out);

}  // namespace densa
