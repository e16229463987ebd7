#pragma once
// AVX-512 matmul for FP8 e4m3 block-scaled and INT4 group-wise weights (quant/fp8_block.h,
// quant/int4_group.h). Requires cpu_isa_hardware() >= kAvx512Bf16. Same batch-invariance
// contract as kernels/matmul.h; the per-(i, r) order is described in matmul_quant_avx512.cpp.
#include <cstdint>

#include "core/tensor_view.h"
#include "core/thread_pool.h"

namespace densa::matmul_internal {

// True when the kernel handles this view: FP8 with scale_cols % 32 == 0, INT4 with
// scale_rows == 1 and group % 32 == 0 (so cols % 32 == 0). Otherwise use the fallback.
bool matmul_quant_avx512_supports(const WeightView& w);

// x: [n, w.cols], y: [n, w.rows]; pool may be null.
void matmul_quant_avx512(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool* pool);

// Test hook: decodes 16 e4m3 codes to fp32 with the kernel's in-register decoder (NaN codes
// give NaN). Requires AVX-512.
void fp8_e4m3_decode16_avx512(const uint8_t* codes, float* out);

}  // namespace densa::matmul_internal
