#pragma once
// Correct-but-simple matmul for weight dtypes the ISA kernels do not handle yet: FP8 e4m3
// block-scaled and INT4 group-wise (quant/fp8_block.h, quant/int4_group.h). It decodes weight
// chunks with the reference dequantizer and runs fp32 dot products, so it holds the same
// batch-invariance contract as kernels/matmul.h. Fast kernels replace it per ISA later.
#include <cstdint>

#include "core/tensor_view.h"
#include "core/thread_pool.h"

namespace densa::matmul_internal {

bool matmul_quant_fallback_supports(DType t);

// x: [n, w.cols], y: [n, w.rows]; writes columns [r_begin, r_end) of y.
void matmul_quant_fallback_rows(const WeightView& w, const float* x, int64_t n, float* y, int64_t r_begin,
                                int64_t r_end);
// Cost of one row in byte-equivalents, for the thread split (see matmul.cpp).
int64_t matmul_quant_fallback_row_cost(const WeightView& w, int64_t n);

}  // namespace densa::matmul_internal
