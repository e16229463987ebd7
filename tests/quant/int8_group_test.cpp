// GGUF Q8_0 repacked for the W8A8 kernel (quant/int8_group.h): every element keeps its value
// bit for bit against the Q8_0 decoder, over random codes (-128 included) and f16 scales of
// every kind, and the layout is the plain int8 matrix plus an f16 scale array.
#include "quant/int8_group.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "quant/dequantize.h"
#include "test_util.h"

namespace densa {
namespace {

TEST(Int8Group, FromQ8_0KeepsEveryValue) {
  const int64_t rows = 5, cols = 96, blocks = rows * cols / 32;
  std::vector<uint8_t> q8 = testing::random_gguf_blocks(blocks, 34, 11);
  q8[2] = 0x80;  // block 0, element 0: -128
  const WeightView q8_view{.dtype = DType::kQ8_0, .rows = rows, .cols = cols, .data = q8.data()};
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  std::vector<uint16_t> scales(static_cast<size_t>(blocks));
  int8_group_from_q8_0(q8.data(), rows, cols, codes, scales);
  const WeightView v = int8_group_view_f16(codes.data(), scales.data(), rows, cols);
  EXPECT_EQ(v.dtype, DType::kI8);
  EXPECT_EQ(v.bytes() + v.scale_bytes(), blocks * 34);  // the same 8.5 bits per weight
  std::vector<float> want(static_cast<size_t>(cols)), got(want.size());
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(q8_view, r, want.data());
    dequantize_row(v, r, got.data());
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << "row " << r;
  }
  EXPECT_EQ(got.size(), static_cast<size_t>(cols));
  dequantize_row(v, 0, got.data());
  EXPECT_EQ(got[0], -128.0f * f16_to_f32(testing::kSpecialF16Scales[0]));
  // Layout by hand: row 1, element 40 is block 4 (row 1 starts at block 3), byte 8 of its codes.
  EXPECT_EQ(codes[static_cast<size_t>(cols + 40)], q8[static_cast<size_t>(4 * 34 + 2 + 8)]);
  EXPECT_EQ(0, std::memcmp(&scales[4], q8.data() + 4 * 34, 2));
}

}  // namespace
}  // namespace densa
