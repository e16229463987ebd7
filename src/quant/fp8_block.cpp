#include "quant/fp8_block.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "quant/fp8.h"

namespace densa {

void fp8_block_quantize(const float* w, int64_t rows, int64_t cols, std::span<uint8_t> codes,
                        std::span<float> scales) {
  const int64_t srows = fp8_block_scale_rows(rows), scols = fp8_block_scale_cols(cols);
  CHECK(static_cast<int64_t>(codes.size()) == rows * cols);
  CHECK(static_cast<int64_t>(scales.size()) == srows * scols);
  for (int64_t br = 0; br < srows; ++br) {
    const int64_t r0 = br * kFp8BlockRows, r1 = std::min(rows, r0 + kFp8BlockRows);
    for (int64_t bc = 0; bc < scols; ++bc) {
      const int64_t c0 = bc * kFp8BlockCols, c1 = std::min(cols, c0 + kFp8BlockCols);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const float scale = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
      scales[static_cast<size_t>(br * scols + bc)] = scale;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) codes[static_cast<size_t>(r * cols + c)] = fp8_e4m3_from_f32(w[r * cols + c] / scale);
    }
  }
}

WeightView fp8_block_view(const uint8_t* codes, const float* scales, int64_t rows, int64_t cols) {
  WeightView v;
  v.dtype = DType::kFP8E4M3;
  v.rows = rows;
  v.cols = cols;
  v.data = codes;
  v.scales_f32 = scales;
  v.scale_rows = kFp8BlockRows;
  v.scale_cols = kFp8BlockCols;
  return v;
}

void fp8_block_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out) {
  DCHECK(w.dtype == DType::kFP8E4M3 && w.scales_f32 != nullptr && w.scale_rows > 0 && w.scale_cols > 0);
  const int64_t scols = (w.cols + w.scale_cols - 1) / w.scale_cols;
  const float* srow = w.scales_f32 + (row / w.scale_rows) * scols;
  const uint8_t* codes = w.row_ptr(row);
  const float* table = fp8_e4m3_decode_table();
  for (int64_t j = begin; j < begin + count; ++j) out[j - begin] = table[codes[j]] * srow[j / w.scale_cols];
}

}  // namespace densa
