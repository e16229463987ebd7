#include "quant/int8_group.h"

#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace densa {

void int8_group_from_q8_0(const uint8_t* q8_0, int64_t rows, int64_t cols, std::span<uint8_t> codes,
                          std::span<uint16_t> scales_f16) {
  constexpr int64_t kBlock = 32, kBlockBytes = 34;
  CHECK(cols % kBlock == 0) << "int8 from q8_0: cols " << cols;
  CHECK(static_cast<int64_t>(codes.size()) == rows * cols);
  CHECK(static_cast<int64_t>(scales_f16.size()) == rows * (cols / kBlock));
  const int64_t blocks = rows * cols / kBlock;
  for (int64_t b = 0; b < blocks; ++b) {  // rows are whole blocks: block b is group b
    const uint8_t* in = q8_0 + b * kBlockBytes;
    std::memcpy(&scales_f16[static_cast<size_t>(b)], in, 2);
    std::memcpy(codes.data() + b * kBlock, in + 2, kBlock);
  }
}

WeightView int8_group_view_f16(const uint8_t* codes, const uint16_t* scales_f16, int64_t rows, int64_t cols) {
  return WeightView{.dtype = DType::kI8, .rows = rows, .cols = cols, .data = codes, .scales_f16 = scales_f16,
                    .scale_rows = 1, .scale_cols = 32};
}

void int8_group_dequantize(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out) {
  CHECK(w.dtype == DType::kI8 && w.scales_f16 != nullptr && w.scale_cols > 0) << "int8 weights need f16 group scales";
  const auto* p = reinterpret_cast<const int8_t*>(w.row_ptr(row));
  const uint16_t* s = w.scales_f16 + row * (w.cols / w.scale_cols);
  for (int64_t j = begin; j < begin + count; ++j) {
    out[j - begin] = static_cast<float>(p[j]) * f16_to_f32(s[j / w.scale_cols]);
  }
}

}  // namespace densa
