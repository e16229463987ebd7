#pragma once
// Internals of kernels/matmul.h: one row-range kernel per ISA level, the dispatcher that picks
// one, and a test hook that forces an ISA level (cpu_isa() reads DENSA_ISA once per process,
// so tests that cover every level call matmul_with_isa instead).
//
// Every row-range kernel computes y[i, r] for all i in [0, n) and r in [r_begin, r_end) with a
// per-(i, r) reduction order fixed by the ISA alone: the weight row is walked in blocks of 32
// elements (the Q8_0/Q4_0 block), each block's products go into the same accumulator lanes in
// the same order, and the lanes are summed by one fixed tree at the end. Tiling over several
// rows and several x rows only interleaves independent (i, r) chains, so the result does not
// depend on n, on the other rows of x, or on how rows are split between threads.
#include <cstdint>

#include "core/cpu_features.h"
#include "core/tensor_view.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace densa::matmul_internal {

// Elements per reduction block (the quantized block size; plain dtypes use it too).
inline constexpr int64_t kBlockElems = 32;

// x: [n, w.cols], y: [n, w.rows]; writes columns [r_begin, r_end) of y.
using MatmulRowsFn = void (*)(const WeightView& w, const float* x, int64_t n, float* y,
                              int64_t r_begin, int64_t r_end);

void matmul_rows_scalar(const WeightView& w, const float* x, int64_t n, float* y,
                        int64_t r_begin, int64_t r_end);
// Require cpu_isa_hardware() >= kAvx2 / kAvx512Bf16 respectively.
void matmul_rows_avx2(const WeightView& w, const float* x, int64_t n, float* y,
                      int64_t r_begin, int64_t r_end);
void matmul_rows_avx512(const WeightView& w, const float* x, int64_t n, float* y,
                        int64_t r_begin, int64_t r_end);

// Decodes `count` elements of a weight row starting at element `begin` to fp32 (exactly the
// values dequantize_row gives). Quantized dtypes need begin and count multiples of 32.
void decode_elems(DType dtype, const uint8_t* row, int64_t begin, int64_t count, float* out);

// matmul() / matmul_many() with an explicit ISA level; isa must not exceed cpu_isa_hardware().
void matmul_with_isa(CpuIsa isa, const WeightView& w, const float* x, int64_t n, float* y,
                     ThreadPool* pool);
void matmul_many_with_isa(CpuIsa isa, std::span<const MatmulJob> jobs, ThreadPool* pool);

}  // namespace densa::matmul_internal
