#include "quant/dequantize.h"

#include <cstring>

#include "core/check.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"
#include "quant/fp8_block.h"
#include "quant/int4_group.h"
#include "quant/int8_group.h"

namespace densa {

void dequantize_row(const WeightView& w, int64_t row, float* out) {
  dequantize_row_range(w, row, 0, w.cols, out);
}

void dequantize_row_range(const WeightView& w, int64_t row, int64_t begin, int64_t count, float* out) {
  const uint8_t* p = w.row_ptr(row);
  switch (w.dtype) {
    case DType::kF32:
      std::memcpy(out, p + 4 * begin, static_cast<size_t>(count) * 4);
      return;
    case DType::kF16:
      p += 2 * begin;
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      return;
    case DType::kBF16:
      p += 2 * begin;
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      return;
    case DType::kQ8_0:
      DCHECK(begin % 32 == 0 && count % 32 == 0);
      p += begin / 32 * 34;
      for (int64_t b = 0; b < count / 32; ++b) {
        const uint8_t* blk = p + b * 34;
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const float d = f16_to_f32(dh);
        for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * static_cast<float>(static_cast<int8_t>(blk[2 + i]));
      }
      return;
    case DType::kQ4_0:
      // 16 bytes of nibbles: low nibble of byte j is element j, high nibble is element j + 16.
      DCHECK(begin % 32 == 0 && count % 32 == 0);
      p += begin / 32 * 18;
      for (int64_t b = 0; b < count / 32; ++b) {
        const uint8_t* blk = p + b * 18;
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const float d = f16_to_f32(dh);
        for (int j = 0; j < 16; ++j) {
          out[b * 32 + j] = d * static_cast<float>((blk[2 + j] & 0x0f) - 8);
          out[b * 32 + j + 16] = d * static_cast<float>((blk[2 + j] >> 4) - 8);
        }
      }
      return;
    case DType::kFP8E4M3:
      fp8_block_dequantize(w, row, begin, count, out);
      return;
    case DType::kI4:
      int4_group_dequantize(w, row, begin, count, out);
      return;
    case DType::kI8:
      int8_group_dequantize(w, row, begin, count, out);
      return;
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4:
    case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4:
      affine_view_dequantize(w, row, begin, count, out);
      return;
    case DType::kI32:
    case DType::kU8:
      break;
  }
  CHECK(false) << "dequantize_row: unsupported weight dtype " << dtype_name(w.dtype);
}

}  // namespace densa
