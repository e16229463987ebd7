#pragma once
// One fp32 matrix -> one stored weight format (the reference quantizers behind
// quantize-on-load and `densa quantize`). Every target is produced from fp32 values, so
// quantizing an F32 or a BF16 checkpoint differs only by what the checkpoint held.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor_view.h"

namespace densa {

struct WeightQuantSpec {
  DType dtype = DType::kBF16;  // kBF16, kFP8E4M3 (128x128 blocks), kI4, kQ8_0, kQ4_0
  int group_size = 128;        // kI4 only: 32 or 128
};

// A quantized matrix and the buffers its view points into (data, then scales if any).
struct QuantizedMatrix {
  WeightView view;
  std::vector<std::unique_ptr<uint8_t[]>> buffers;
};

// ok, or invalid_argument naming the problem (unsupported target, group size, or a shape the
// target cannot hold: cols % group for INT4, cols % 32 for Q8_0/Q4_0).
Status check_quant_target(const WeightQuantSpec& spec, int64_t rows, int64_t cols);

// Quantizes src [rows, cols] row-major. Precondition: check_quant_target(spec, rows, cols) ok.
QuantizedMatrix quantize_matrix(const float* src, int64_t rows, int64_t cols, const WeightQuantSpec& spec);

// Dequantizes any stored view to fp32 [rows * cols] with the reference dequantizer.
std::vector<float> dequantize_matrix(const WeightView& v);

}  // namespace densa
