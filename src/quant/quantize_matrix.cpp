#include "quant/quantize_matrix.h"

#include <span>

#include "core/check.h"
#include "quant/dequantize.h"
#include "quant/fp8_block.h"
#include "quant/ggml_quant.h"
#include "quant/int4_group.h"

namespace densa {

Status check_quant_target(const WeightQuantSpec& spec, int64_t rows, int64_t cols) {
  const std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  switch (spec.dtype) {
    case DType::kBF16:
    case DType::kFP8E4M3: return Status::ok();
    case DType::kI4:
      if (spec.group_size != 32 && spec.group_size != 128) {
        return invalid_argument("int4 group size must be 32 or 128, got " + std::to_string(spec.group_size));
      }
      if (cols % spec.group_size != 0) {
        return invalid_argument("int4 g" + std::to_string(spec.group_size) + " needs the input dimension to be a " +
                                "multiple of the group size; matrix " + shape);
      }
      return Status::ok();
    case DType::kQ8_0:
    case DType::kQ4_0:
      if (cols % 32 != 0) return invalid_argument(std::string(dtype_name(spec.dtype)) + " needs cols % 32 == 0; matrix " + shape);
      return Status::ok();
    case DType::kF32:
    case DType::kF16:
    case DType::kI8:
    case DType::kI32:
    case DType::kU8:
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4:
    case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: break;
  }
  return invalid_argument("unsupported weight dtype '" + std::string(dtype_name(spec.dtype)) +
                          "' (supported: bf16, fp8, int4, q8_0, q4_0)");
}

Result<WeightQuantSpec> weight_quant_spec_from_name(std::string_view name, int int4_group_size) {
  if (name == "bf16") return WeightQuantSpec{DType::kBF16};
  if (name == "fp8") return WeightQuantSpec{DType::kFP8E4M3};
  if (name == "int4") return WeightQuantSpec{DType::kI4, int4_group_size};
  if (name == "int4-g32") return WeightQuantSpec{DType::kI4, 32};
  if (name == "int4-g128") return WeightQuantSpec{DType::kI4, 128};
  if (name == "q8_0") return WeightQuantSpec{DType::kQ8_0};
  if (name == "q4_0") return WeightQuantSpec{DType::kQ4_0};
  return invalid_argument("must be bf16, fp8, int4, int4-g32, int4-g128, q8_0 or q4_0, not \"" + std::string(name) +
                          "\"");
}

std::string weight_quant_spec_name(const WeightQuantSpec& spec) {
  switch (spec.dtype) {
    case DType::kFP8E4M3: return "fp8";
    case DType::kI4: return "int4-g" + std::to_string(spec.group_size);
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kF32:
    case DType::kF16:
    case DType::kI8:
    case DType::kI32:
    case DType::kU8:
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4:
    case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: break;
  }
  return std::string(dtype_name(spec.dtype));
}

std::string_view weight_view_format_name(const WeightView& v) {
  if (v.scales_f16 != nullptr && v.dtype == DType::kI4) return "q4_0";
  if (v.scales_f16 != nullptr && v.dtype == DType::kI8) return "q8_0";
  return dtype_name(v.dtype);
}

bool weight_view_in_format(const WeightView& v, const WeightQuantSpec& spec) {
  if (v.dtype != spec.dtype) return false;
  if (spec.dtype == DType::kI4) return v.scales_bf16 != nullptr && v.scale_rows == 1 && v.scale_cols == spec.group_size;
  if (spec.dtype == DType::kFP8E4M3) return v.scale_rows == kFp8BlockRows && v.scale_cols == kFp8BlockCols;
  return true;
}

namespace {

uint8_t* alloc(QuantizedMatrix& m, int64_t bytes) {
  m.buffers.push_back(std::make_unique<uint8_t[]>(static_cast<size_t>(bytes)));
  return m.buffers.back().get();
}

}  // namespace

QuantizedMatrix quantize_matrix(const float* src, int64_t rows, int64_t cols, const WeightQuantSpec& spec) {
  CHECK(check_quant_target(spec, rows, cols).is_ok());
  QuantizedMatrix m;
  WeightView& v = m.view;
  v.rows = rows;
  v.cols = cols;
  switch (spec.dtype) {
    case DType::kBF16: {
      auto* p = reinterpret_cast<uint16_t*>(alloc(m, static_cast<int64_t>(rows * cols) * 2));
      for (int64_t i = 0; i < rows * cols; ++i) p[i] = f32_to_bf16(src[i]);
      v.dtype = DType::kBF16;
      v.data = p;
      return m;
    }
    case DType::kFP8E4M3: {
      const int64_t nscales = fp8_block_scale_rows(rows) * fp8_block_scale_cols(cols);
      uint8_t* codes = alloc(m, static_cast<int64_t>(rows * cols));
      auto* scales = reinterpret_cast<float*>(alloc(m, static_cast<int64_t>(nscales) * 4));
      fp8_block_quantize(src, rows, cols, {codes, static_cast<size_t>(rows * cols)}, {scales, static_cast<size_t>(nscales)});
      v = fp8_block_view(codes, scales, rows, cols);
      return m;
    }
    case DType::kI4: {
      const int64_t nscales = rows * (cols / spec.group_size);
      uint8_t* packed = alloc(m, static_cast<int64_t>(rows * cols / 2));
      auto* scales = reinterpret_cast<uint16_t*>(alloc(m, static_cast<int64_t>(nscales) * 2));
      int4_group_quantize(src, rows, cols, spec.group_size, {packed, static_cast<size_t>(rows * cols / 2)},
                          {scales, static_cast<size_t>(nscales)});
      v = int4_group_view(packed, scales, rows, cols, spec.group_size);
      return m;
    }
    case DType::kQ8_0:
    case DType::kQ4_0: {
      v.dtype = spec.dtype;
      const int64_t rb = dtype_row_bytes(spec.dtype, cols);
      uint8_t* p = alloc(m, static_cast<int64_t>(rows * rb));
      for (int64_t r = 0; r < rows; ++r) {
        if (spec.dtype == DType::kQ8_0) {
          quantize_row_q8_0(src + r * cols, cols, p + r * rb);
        } else {
          quantize_row_q4_0(src + r * cols, cols, p + r * rb);
        }
      }
      v.data = p;
      return m;
    }
    case DType::kF32:
    case DType::kF16:
    case DType::kI8:
    case DType::kI32:
    case DType::kU8:
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4:
    case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: break;
  }
  CHECK(false) << "quantize_matrix: unreachable";
  return m;
}

std::vector<float> dequantize_matrix(const WeightView& v) {
  std::vector<float> out(static_cast<size_t>(v.rows * v.cols));
  for (int64_t r = 0; r < v.rows; ++r) dequantize_row(v, r, out.data() + r * v.cols);
  return out;
}

}  // namespace densa
