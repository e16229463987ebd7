#pragma once
// Matrix products against a weight matrix in any stored dtype:
//   y[n, w.rows] = x[n, w.cols] . w^T       (fp32 activations in and out, fp32 accumulation;
// FP8 and INT4 kernels round x once per call, and so do BF16 matrices on AMX tiles:
// matmul_fp8_on_amx, matmul_bf16_on_amx below)
// Contract (batch invariance): every output element y[i, r] is computed with the same
// arithmetic and the same reduction order whatever n, the other rows of x, or the thread
// count, so a request's result never depends on what else is in the batch.
#include <cstdint>
#include <span>

#include "core/tensor_view.h"
#include "core/thread_pool.h"

namespace densa {

// x: [n, w.cols] row-major, y: [n, w.rows] row-major. pool may be null (single thread).
void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool* pool);

// One product of matmul_many: y[n, w.rows] = x[n, w.cols] . w^T.
struct MatmulJob {
  WeightView w;
  const float* x = nullptr;
  int64_t n = 0;
  float* y = nullptr;
  // BF16 / F16 weights keep fp32 activations and exact products for this product, as if
  // w.amx were AmxUse::kOff: for the MoE router, whose expert choice is the decision most
  // sensitive to rounding and whose matrix is small. Other dtypes run as w.amx says.
  bool f32_x = false;
  // When set, row i of this product's x is row x_rows[i] of x, which then holds x_rows_of rows
  // (each x_rows[i] < x_rows_of): an MoE expert's routed tokens, read in place. matmul_many
  // rounds such an x once for all the products that share it (x, x_rows_of and the layout)
  // and copies each product's rows out of that, so a token routed to K experts is quantized
  // once, not K times; the results are those of the same product on the rows copied out in
  // fp32, bit for bit. Layouts whose prepared rows cannot be copied get the fp32 rows copied.
  const int32_t* x_rows = nullptr;
  int64_t x_rows_of = 0;
};

// Several independent products in one pass over the pool (e.g. Q, K and V of a layer, gate
// and up of a SwiGLU FFN, every active expert of an MoE layer): the threads split the rows of
// all of them by cost, so small products share a hand-off and the split stays even. Every
// y[i, r] is computed exactly as matmul() computes it. Outputs must not overlap inputs.
void matmul_many(std::span<const MatmulJob> jobs, ThreadPool* pool);

// The layout INT4 g32 matrices run fastest in here (quant/int4_group.h lays them out):
//  kInt4Tiles16 where the 16-row tile kernels run (AVX-512 VNNI with BF16, or AVX2 with FMA and
//    F16C): exact group sums, GEMMs on AMX-INT8 where it is granted (VNNI otherwise, still faster
//    than 8-row tiles), the decode GEMV on VNNI or AVX2, all with the same bits;
//  kInt4Tiles8 where only the AVX-512 kernel with GFNI runs (the row-major kernel's bits);
//  kRows otherwise.
// kRows and kInt4Tiles8 give the same results; kInt4Tiles16 rounds differently (one fp32 fma
// per group, ref::matmul_int8_groups_fp32), and gives one result for every n.
WeightLayout matmul_int4_layout();
// Whether this CPU runs INT4 g32 in `layout` (kRows: always). This and the two below answer at
// this process's level, cpu_isa(): a process capped by DENSA_ISA lays weights out as a CPU of
// that level would.
bool matmul_runs_int4_layout(WeightLayout layout);
// Whether INT8 (GGUF Q8_0) matrices run here in 16-row tiles (WeightLayout::kInt8Tiles16,
// quant/int8_group.h): where the AVX-512 VNNI or the AVX2 tile kernels read that layout. They
// compute exact per-group sums (on AMX-INT8 for GEMMs where the CPU has it), so their results
// differ in rounding from the row-major kernel's; each layout gives one result for every n.
bool matmul_prefers_int8_tiles();
// The same for affine-row matrices (GGUF K-quants, IQ4, MXFP4; WeightLayout::kAffineTiles16,
// quant/affine_tiles.h): where the AVX-512 VNNI or the AVX2 tile kernels read that layout. On
// AVX2 the row-major matrices run the tiles' arithmetic too (the same bits in either layout).
bool matmul_prefers_affine_tiles();

// Whether FP8 matrices whose WeightView::amx is `use` run on AMX tiles in this process
// (matmul() at cpu_isa(): the AVX-512 level, and for kAuto AMX-BF16 granted with DENSA_AMX not
// 0); otherwise on vdpbf16ps or the fallback. The two paths round the sums differently, so the
// matrices of one model share one setting.
bool matmul_fp8_on_amx(AmxUse use = AmxUse::kAuto);

// Whether BF16 and F16 matrices whose WeightView::amx is `use` run on AMX tiles in this process
// (the same conditions as FP8): then x is rounded to bf16 for them (W16A16, as GPU engines and
// llama.cpp compute BF16 / F16 models; F16 weights stay exact, split into two bf16 parts),
// otherwise (AmxUse::kOff: serve --bf16-activations f32, the evaluator's "+x-f32" weights,
// tests against fp32 references) they keep fp32 activations and exact products on fp32 FMAs.
bool matmul_bf16_on_amx(AmxUse use = AmxUse::kAuto);

}  // namespace densa
