#pragma once
// Reference dequantization of one weight row to fp32 (the oracle every fast kernel and every
// quantizer is tested against). Supports every dtype a WeightView can hold.
#include <cstdint>

#include "core/tensor_view.h"

namespace densa {

// out: [w.cols]
void dequantize_row(const WeightView& w, int64_t row, float* out);

}  // namespace densa
