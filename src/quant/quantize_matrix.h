#pragma once
// One fp32 matrix -> one stored weight format (the reference quantizers behind
// quantize-on-load and `densa quantize`). Every target is produced from fp32 values, so
// quantizing an F32 or a BF16 checkpoint differs only by what the checkpoint held.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor_view.h"

namespace densa {

struct WeightQuantSpec {
  DType dtype = DType::kBF16;  // kBF16, kFP8E4M3 (128x128 blocks), kI4, kQ8_0, kQ4_0
  int group_size = 128;        // kI4 only: 32 or 128
};

// The weight formats by name, one vocabulary for --weight-dtype, --lm-head-dtype, `densa eval`
// and the checkpoint writers: bf16, fp8 (128x128 blocks), int4 (group int4_group_size),
// int4-g32, int4-g128, q8_0, q4_0. Anything else is invalid_argument "must be ..., not "x"".
Result<WeightQuantSpec> weight_quant_spec_from_name(std::string_view name, int int4_group_size);
// The name weight_quant_spec_from_name reads back as `spec` ("fp8", "int4-g32", ...).
std::string weight_quant_spec_name(const WeightQuantSpec& spec);

// True when v is already stored as spec (same dtype; INT4 with the same group, FP8 with
// 128x128 blocks): converting it would only lose precision, so quantize-on-load keeps it.
// The dtype name users know a matrix by: the GGUF name for Q4_0 / Q8_0 repacked at load
// (INT4 / INT8 with f16 scales: "q4_0" / "q8_0"), else dtype_name(v.dtype).
std::string_view weight_view_format_name(const WeightView& v);

bool weight_view_in_format(const WeightView& v, const WeightQuantSpec& spec);

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
