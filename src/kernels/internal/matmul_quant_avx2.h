#pragma once
// AVX2 kernels for INT8 and INT4 g32 weights in 16-row tiles (WeightLayout::kInt8Tiles16: GGUF
// Q8_0 repacked; kInt4Tiles16: GGUF Q4_0 and INT4 g32 checkpoints), and for the same formats
// row-major (the GGUF affine rows take kernels/matmul/matmul_affine_avx2.cpp through the same
// entry points) (matrices the tiles do not take, --int4-layout / --int8-layout rows), for CPUs without AVX-512
// (AMD Zen 2 / Zen 3, Intel before Ice Lake) and for tests on any CPU with AVX2. They read the
// tiles and the prepared activations (kernels/internal/int8t_x.h) the AVX-512 kernels read, and
// compute the same arithmetic: per output (x row i, weight row r) and per 32-column group g in
// column order, the exact int32 sum S of code * q, then acc = fma(float(S), w_scale[r][g] *
// x_scale[i][g], acc) (ref::matmul_int8_groups_fp32). So they give the AVX-512 VNNI and AMX-INT8
// kernels' bits, for every n. Requires cpu_isa_hardware() >= CpuIsa::kAvx2 (AVX2, FMA, F16C).
// The kernels are in kernels/matmul/quant_tiles16_avx2.cpp.
#include <cstdint>

#include "core/tensor_view.h"

namespace densa::matmul_internal {

// x rows per x block of the AVX2 tile GEMMs: the prepared rows of one block (~256 KB) stay in L2
// while the thread's weight tiles stream past them once per block. A multiple of 16 (the
// prepared layout's blocks) and of the 4-row register tile.
inline constexpr int64_t kAvx2XBlockBytes = 256 * 1024;
inline constexpr int64_t kAvx2TileX = 48;

// True when the CPU has AVX2 with FMA and F16C and w is INT8 or INT4 with one scale per 32
// columns (INT4: f16 or bf16; INT8: f16), in kInt8Tiles16 / kInt4Tiles16 or row-major, or affine
// rows (GGUF K-quants / IQ4 / MXFP4, kernels/internal/matmul_affine.h) in kAffineTiles16 or
// row-major.
bool matmul_quant_avx2_supports(const WeightView& w);
// Whether products of a and b may share one preparation of the same x.
bool matmul_quant_avx2_same_x_layout(const WeightView& a, const WeightView& b);
// Whether this CPU runs the 16-row tile layouts on AVX2.
bool matmul_quant_avx2_tiles_supported();

// As matmul_quant_avx512_prepare_rows for these layouts: x rows [i_begin, i_end) of x ([n,
// w.cols]) rounded into xp (matmul_quant_avx2_x_bytes(w, n) bytes, 64-byte aligned), the bytes
// the AVX-512 preparation writes for those rows. Disjoint ranges may run on different threads.
int64_t matmul_quant_avx2_x_bytes(const WeightView& w, int64_t n);
void matmul_quant_avx2_prepare_rows(const WeightView& w, const float* x, int64_t n, int64_t i_begin, int64_t i_end,
                                    uint8_t* xp);
// As matmul_quant_avx512_gather_rows for these layouts (kernels/internal/int8t_x.h).
void matmul_quant_avx2_gather_rows(const WeightView& w, const uint8_t* src, const int32_t* rows, int64_t n,
                                   int64_t i_begin, int64_t i_end, uint8_t* dst);
// Columns [r_begin, r_end) of y ([n, w.rows]; tiles: whole 16-row tiles) from the prepared xp.
void matmul_quant_avx2_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin,
                            int64_t r_end);
// Cost of one row in byte-equivalents, for the thread split (see matmul.cpp).
int64_t matmul_quant_avx2_row_cost(const WeightView& w, int64_t n);

// activation_q8_quantize (quant/activation_q8.h) of one row on AVX2, the same q and scales bit
// for bit: q[cols], sx[cols / 32]; cols % 32 == 0.
void activation_q8_quantize_avx2(const float* x, int64_t cols, int8_t* q, float* sx);

}  // namespace densa::matmul_internal
