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

// x: [n, w.cols], y: [n, w.rows]; pool may be null.
void matmul_quant_fallback(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool* pool);

}  // namespace densa::matmul_internal
