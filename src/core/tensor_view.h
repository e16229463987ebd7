#pragma once
// Non-owning views over tensors. Kernels take these (or std::span) and never allocate.
#include <cstdint>

#include "core/dtype.h"

namespace densa {

// How a matrix's codes and scales sit in memory.
//  kRows: row-major as described on WeightView.
//  kInt4Tiles8: INT4 g32 only (quant/int4_group.h), rows % 8 == 0, cols % 128 == 0. The
//    layout the AVX-512 decode kernel streams in one pass: per tile of 8 rows, per 128 columns,
//    576 bytes: the 8 rows' 64 code bytes (each exactly the row-major bytes), then their 4 group
//    scales each (row r's at byte 512 + 8 r). One sequential stream per thread instead of 16
//    short ones (8 rows of codes, 8 of scales), and one load brings 8 rows' scales. `data`
//    points at the first tile; the scale pointer (bf16 or f16) says the scales' format and
//    points inside the tiles (at data + 512). row_ptr() does not apply; read values through
//    int4_group_dequantize / int4_group_scale.
//  kInt8Tiles16: INT8 g32 with f16 scales only (GGUF Q8_0 repacked, quant/int8_group.h),
//    rows % 16 == 0, cols % 128 == 0. Per tile of 16 rows, per 128 columns (4 groups), 2,176
//    bytes: for each group g, 512 bytes of the 16 rows' 32 codes in VNNI order (byte
//    (k / 4) * 64 + r * 4 + k % 4 holds row r's element k of the group, stored as code + 128),
//    then the 4 groups' 16 f16 scales (group g's at byte 2048 + 32 g). A group's 512 bytes are
//    one AMX B tile and eight vpdpbusd operands (lane = row). `data` points at the first tile,
//    scales_f16 at data + 2048. row_ptr() does not apply; read values through int8_group_code /
//    int8_group_scale / int8_group_dequantize.
//  kInt4Tiles16: INT4 g32 only (quant/int4_group.h), rows % 16 == 0, cols % 128 == 0: the INT8
//    16-row tiles' order at 4 bits, so that its GEMMs run on AMX-INT8 with the decode GEMV's
//    bits. Per tile of 16 rows, per 128 columns, 1,152 bytes: for each group, 256 bytes whose
//    low nibbles are the group's columns 0-15 and high nibbles 16-31, each in the INT8 tiles'
//    VNNI order (byte (k / 4) * 64 + r * 4 + k % 4), then the 4 groups' 16 scales (group g's at
//    byte 1024 + 32 g; bf16 or f16 as the scale pointer says, which points at data + 1024).
//    row_ptr() does not apply; read values through int4_group_nibble / int4_group_scale.
//  kAffineTiles16: affine rows (GGUF K-quants, IQ4, MXFP4; quant/affine_rows.h), rows % 16 == 0.
//    The bytes of each 16 rows reordered per 128 columns so that a group's codes are one AMX
//    B tile and the 16 rows' scales one vector (quant/affine_tiles.h). row_ptr() does not
//    apply; read values through affine_row_block / affine_view_dequantize.
enum class WeightLayout : uint8_t { kRows, kInt4Tiles8, kInt8Tiles16, kAffineTiles16, kInt4Tiles16 };

// Whether a matrix's products may run on AMX tiles (kernels/matmul.h). For FP8, BF16 and F16 the
// AMX path rounds differently from the vector one (BF16 / F16 also round x to bf16 there); for
// the INT8 and affine 16-row tiles both paths give the same bits.
//  kAuto: on AMX where cpu_use_amx() (the CPU has the unit, Linux grants it, DENSA_AMX is not
//    0) and the kernel takes the matrix.
//  kOff: never. BF16 / F16 matrices then keep fp32 activations and exact products on FMAs
//    (--bf16-activations f32, LoadOptions::bf16_f32_activations).
//  kOn: always; the CPU must have the unit (tests that run both paths on one CPU).
enum class AmxUse : uint8_t { kAuto, kOff, kOn };

// A [rows, cols] weight matrix, row-major: row r holds output feature r (the Hugging Face
// [out, in] layout, which is also GGUF's ne0-contiguous layout). Block-quantized dtypes pack
// each row independently. Scaled formats point at their scales here.
struct WeightView {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;  // rows * dtype_row_bytes(dtype, cols) bytes
  // Scales of the scaled dtypes; each dtype uses one pointer, the other stays null.
  //  FP8 block-scaled: scales_f32[ceil(rows/scale_rows)][ceil(cols/scale_cols)],
  //    value = fp8 * scale.
  //  INT4 group-wise: scales_bf16[rows][cols/scale_cols] as bf16 bits (how compressed-tensors
  //    checkpoints store them: 16 bits per group, 0.5 bit per weight at g32), scale_rows = 1,
  //    scale_cols = group size, value = (nibble - 8) * bf16_to_f32(scale).
  //    Or scales_f16[rows][cols/scale_cols] as f16 bits instead: GGUF Q4_0 repacked at load
  //    (quant/int4_group.h), whose f16 scales are not all exact in bf16.
  //  INT8 group-wise (kI8, GGUF Q8_0 repacked, quant/int8_group.h): scales_f16[rows][cols/32],
  //    value = int8 * f16_to_f32(scale).
  const float* scales_f32 = nullptr;
  const uint16_t* scales_bf16 = nullptr;
  const uint16_t* scales_f16 = nullptr;
  int64_t scale_rows = 0;
  int64_t scale_cols = 0;
  WeightLayout layout = WeightLayout::kRows;
  AmxUse amx = AmxUse::kAuto;  // a property of this matrix, copied with the view

  int64_t row_bytes() const { return dtype_row_bytes(dtype, cols); }
  // Row r's packed elements (layout kRows only).
  const uint8_t* row_ptr(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * row_bytes();
  }
  int64_t bytes() const { return rows * row_bytes(); }  // of the codes (tiled layouts: the tiles hold these and the scales)
  bool empty() const { return data == nullptr; }
  bool has_scales() const {
    return (scales_f32 != nullptr || scales_bf16 != nullptr || scales_f16 != nullptr) && scale_rows > 0 && scale_cols > 0;
  }
  int64_t num_scales() const {
    return has_scales() ? ((rows + scale_rows - 1) / scale_rows) * ((cols + scale_cols - 1) / scale_cols) : 0;
  }
  // Bytes of the scales as stored in memory (0 without scales).
  int64_t scale_bytes() const { return num_scales() * (scales_f32 != nullptr ? 4 : 2); }
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
