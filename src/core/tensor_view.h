#pragma once
// Non-owning views over tensors. Kernels take these (or std::span) and never allocate.
#include <cstdint>

#include "core/dtype.h"

namespace densa {

// A [rows, cols] weight matrix, row-major: row r holds output feature r (the Hugging Face
// [out, in] layout, which is also GGUF's ne0-contiguous layout). Block-quantized dtypes pack
// each row independently. Scaled formats point at their scales here.
struct WeightView {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;  // rows * dtype_row_bytes(dtype, cols) bytes
  // FP8 block-scaled: scales[rows/scale_rows][cols/scale_cols], value = fp8 * scale.
  // INT4 group-wise: scale_rows = 1, scale_cols = group size.
  const float* scales = nullptr;
  int64_t scale_rows = 0;
  int64_t scale_cols = 0;

  int64_t row_bytes() const { return dtype_row_bytes(dtype, cols); }
  const uint8_t* row_ptr(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * row_bytes();
  }
  int64_t bytes() const { return rows * row_bytes(); }
  bool empty() const { return data == nullptr; }
};

// A generic n-d view (up to 4 dims, shape[0] outermost), used at the I/O edge.
struct TensorView {
  DType dtype = DType::kF32;
  int ndim = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  const void* data = nullptr;
  int64_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
};

}  // namespace densa
