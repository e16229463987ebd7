#pragma once
// Naive oracles for the AVX-512 FP8 / INT4 / INT8 matmul, which rounds the activations once per call
// (kernels/matmul/quant_*.cpp): the same products from the same rounded activations,
// accumulated in double.
#include <cstdint>

#include "core/tensor_view.h"

namespace densa::ref {

// FP8 weights, x rounded to bf16: y[i, r] = sum_k dequantize(w)[r, k] * bf16(x[i, k]).
void matmul_fp8_x_bf16(const WeightView& w, const float* x, int64_t n, float* y);

// FP8 weights with their scale rounded to bf16, x rounded to bf16 (the AMX path):
// y[i, r] = sum_k bf16(dequantize(w)[r, k]) * bf16(x[i, k]).
void matmul_fp8_scaled_x_bf16(const WeightView& w, const float* x, int64_t n, float* y);

// INT4 weights, x quantized by activation_q8_quantize (quant/activation_q8.h):
// y[i, r] = sum over x blocks b and weight groups g of w_scale[r, g] (bf16) * x_scale[i, b] *
// sum_{k in b and g} (nibble - 8) * x_q[i, k].
void matmul_int4_x_q8(const WeightView& w, const float* x, int64_t n, float* y);

// INT8 weights with f16 group scales (GGUF Q8_0 repacked), x quantized the same way:
// y[i, r] = sum over 32-element blocks b of w_scale[r, b] * x_scale[i, b] * sum_{k in b} w_q * x_q.
void matmul_int8_x_q8(const WeightView& w, const float* x, int64_t n, float* y);

// The INT8 16-row tile layout's arithmetic (WeightLayout::kInt8Tiles16), in scalar fp32: per
// (i, r), per 32-column group g in order, S = the exact sum of w_q * x_q over the group and
// acc = fmaf(float(S), w_scale[r, g] * x_scale[i, g], acc) (the product rounded to fp32 first);
// y[i, r] = acc. The kernels must equal it bit for bit. Reads either layout; cols % 32 == 0.
// INT4 g32 (DType::kI4, w_q = nibble - 8, any layout) the same way: the arithmetic of its 16-row
// tiles (WeightLayout::kInt4Tiles16).
void matmul_int8_groups_fp32(const WeightView& w, const float* x, int64_t n, float* y);

// Affine-row weights (DType::kA8G16 / kA8G32 / kA4*, quant/affine_rows.h): the arithmetic stated in
// kernels/internal/matmul_affine.h, lane by lane in scalar fp32. The AVX-512 kernel must equal
// it bit for bit.
void matmul_affine_lanes_fp32(const WeightView& w, const float* x, int64_t n, float* y);

// Affine rows in the 16-row tile layout (WeightLayout::kAffineTiles16): the per-group fp32 chain
// stated in kernels/internal/matmul_affine.h, in scalar code. That layout's VNNI and AMX kernels
// must equal it bit for bit. Reads either layout.
void matmul_affine_groups_fp32(const WeightView& w, const float* x, int64_t n, float* y);

// The same weights against x quantized the same way, accumulated in double from the exact
// weight values code * scale + min: y[i, r] = sum_k w[r, k] * x_scale[i, k / 32] * x_q[i, k].
void matmul_affine_x_q8(const WeightView& w, const float* x, int64_t n, float* y);

}  // namespace densa::ref
