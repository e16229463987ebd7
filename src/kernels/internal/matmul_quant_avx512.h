#pragma once
// AVX-512 matmul for FP8 e4m3 block-scaled and INT4 group-wise weights (quant/fp8_block.h,
// quant/int4_group.h): FP8 x bf16(x) by vdpbf16ps (or by tdpbf16ps on AMX tiles, see
// matmul_quant_fp8_amx), INT4 x int8(x) by vpdpbusd (activations
// rounded once per call; error bounds and twins in
// matmul_quant_avx512_kernels.h). Requires
// cpu_isa_hardware() >= kAvx512Bf16 (+ AVX512-VBMI for FP8). Same batch-invariance contract as
// kernels/matmul.h; the per-(i, r) order is described in
// matmul_quant_avx512_kernels.h; the kernels are kernels/matmul/quant_*.cpp.
#include <cstdint>

#include "core/tensor_view.h"
#include "core/thread_pool.h"
#include "core/worker_scratch.h"

namespace densa::matmul_internal {

// True when the kernel handles this view on this CPU: FP8 with scale_cols % 64 == 0 and
// AVX512-VBMI, INT4 with scale_rows == 1, group % 32 == 0 dividing cols, and group dividing 128
// or a multiple of it. Otherwise use the fallback.
bool matmul_quant_avx512_supports(const WeightView& w);
// Whether this CPU runs the INT4 8-row tile layout (WeightLayout::kInt4Tiles8): AVX-512 with
// VNNI, VBMI and GFNI.
bool matmul_quant_avx512_int4_tiles_supported();
// Whether this CPU runs the INT8 16-row tile layout (WeightLayout::kInt8Tiles16): AVX-512 with
// VNNI. Its GEMMs also use AMX-INT8 where cpu_use_amx() and cpu_has_amx_int8() hold; both give
// the same bits, so nothing about results depends on that.
bool matmul_quant_avx512_int8_tiles_supported();
// Whether the 16-row tile layouts (INT8 and affine rows) of a matrix whose WeightView::amx is
// `use` run their GEMMs on AMX-INT8: kAuto where cpu_use_amx() and cpu_has_amx_int8(), kOn
// always (CHECKs both), kOff never.
bool matmul_quant_int8_amx_usable(AmxUse use);
// activation_q8_quantize (quant/activation_q8.h) of one row on AVX-512, the same q and scales
// bit for bit: q[cols], sx[cols / 32]. cols % 128 == 0; needs cpu_isa_hardware() >= kAvx512Bf16.
void activation_q8_quantize_avx512(const float* x, int64_t cols, int8_t* q, float* sx);

// The kernel in two steps, so that matmul() can split rows of several products over one
// thread-pool call: prepare rounds the activations once (x: [n, w.cols] into xp, 64-byte
// aligned, matmul_quant_avx512_x_bytes(w, n) bytes), rows writes columns [r_begin, r_end)
// of y ([n, w.rows]) from them. Both take their scratch buffers from ws, the scratch of the
// thread they run on (kernels/internal/scratch_slots.h).
int64_t matmul_quant_avx512_x_bytes(const WeightView& w, int64_t n);
void matmul_quant_avx512_prepare(const WeightView& w, const float* x, int64_t n, uint8_t* xp, WorkerScratch& ws);
// The same for x rows [i_begin, i_end) only (n is still x's row count): disjoint ranges that
// cover [0, n) may run on different threads and give the buffer prepare gives.
void matmul_quant_avx512_prepare_rows(const WeightView& w, const float* x, int64_t n, int64_t i_begin, int64_t i_end,
                                      uint8_t* xp, WorkerScratch& ws);
// Whether a preparation's rows can be copied out of a preparation of more rows of the same x
// (matmul_quant_avx512_gather_rows): every layout but the AMX FP8 / BF16 one, whose tokens
// interleave within its B tiles.
bool matmul_quant_avx512_gathers(const WeightView& w);
// Rows [i_begin, i_end) of dst (the preparation of n rows) as rows rows[i] of src, a preparation
// of the same layout (matmul_quant_avx512_same_x_layout): the bytes prepare_rows would write for
// those x rows. The call that ends at n writes the padding prepare_rows writes. Disjoint ranges
// may run on different threads.
void matmul_quant_avx512_gather_rows(const WeightView& w, const uint8_t* src, const int32_t* rows, int64_t n,
                                     int64_t i_begin, int64_t i_end, uint8_t* dst);
// Whether two products' prepared activations are the same bytes when they share x and n.
bool matmul_quant_avx512_same_x_layout(const WeightView& a, const WeightView& b);
void matmul_quant_avx512_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin,
                              int64_t r_end, WorkerScratch& ws);
// Cost of one row in byte-equivalents, for the thread split (see matmul.cpp).
int64_t matmul_quant_avx512_row_cost(const WeightView& w, int64_t n);

// Whether FP8 matrices whose WeightView::amx is `use` run on AMX tiles: kAuto where
// cpu_use_amx() (AMX-BF16 granted, DENSA_AMX not 0), kOn always (CHECKs cpu_has_amx_bf16()),
// kOff never. The two paths round the sums differently; each gives one result for every n.
bool matmul_quant_fp8_amx(AmxUse use);

// Whether BF16 and F16 matrices whose WeightView::amx is `use` run on AMX tiles (W16A16: x
// rounded to bf16, tdpbf16ps; the stored weights are exact, an F16 one as two bf16 parts): kAuto
// where cpu_use_amx() and the AVX-512 level, kOn always (CHECKs cpu_has_amx_bf16()), kOff
// never; then they take the exact fp32-activation kernels of matmul_isa.h. As for FP8, each
// path gives one result for every n.
bool matmul_quant_bf16_amx(AmxUse use);

// Test hook: decodes 16 e4m3 codes to fp32 with the kernel's in-register decoder (table to
// bf16, sign or-ed in; NaN codes give NaN). Requires AVX-512 and AVX512-VBMI.
void fp8_e4m3_decode16_avx512(const uint8_t* codes, float* out);

}  // namespace densa::matmul_internal
