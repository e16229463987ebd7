// GGUF Q8_0 repacked for the W8A8 kernel (quant/int8_group.h): every element keeps its value
// bit for bit against the Q8_0 decoder, over random codes (-128 included) and f16 scales of
// every kind, and the layout is the plain int8 matrix plus an f16 scale array.
#include "quant/int8_group.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "quant/dequantize.h"

namespace densa {
namespace {

TEST(Int8Group, FromQ8_0KeepsEveryValue) {
  const int64_t rows = 5, cols = 96, blocks = rows * cols / 32;
  std::mt19937 rng(11);
  std::vector<uint8_t> q8(static_cast<size_t>(blocks * 34));
  for (auto& b : q8) b = static_cast<uint8_t>(rng());
  const uint16_t special[] = {0x3c01, 0xbc01, 0x0001, 0x83ff, 0x7bff, 0xfbff, 0x0000, 0x8000, 0x2e66, 0xb555};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint16_t d = b < 10 ? special[b] : static_cast<uint16_t>(static_cast<uint16_t>(rng()) & 0x7bff);
    std::memcpy(q8.data() + b * 34, &d, 2);
  }
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
  EXPECT_EQ(got[0], -128.0f * f16_to_f32(special[0]));
  // Layout by hand: row 1, element 40 is block 4 (row 1 starts at block 3), byte 8 of its codes.
  EXPECT_EQ(codes[static_cast<size_t>(cols + 40)], q8[static_cast<size_t>(4 * 34 + 2 + 8)]);
  EXPECT_EQ(0, std::memcmp(&scales[4], q8.data() + 4 * 34, 2));
}

}  // namespace
}  // namespace densa
