// INT4 group-wise weights: dequantization bit-exact against an independent decoder written
// here (compressed-tensors' int32 words: nibble i of word j is element 8j+i, value q+8; bf16
// scale bits widened by hand), packing equal to compressed-tensors pack_to_int32, quantize ->
// dequantize error bounds, quantize_matrix keeping bf16 scales that are exactly what the values
// were quantized with, and the matmul fallback against ref::matmul.
#include "quant/int4_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/reference/matmul_ref.h"
#include "quant/dequantize.h"
#include "quant/quantize_matrix.h"
#include "test_util.h"

namespace densa {
namespace {

// bf16 bits -> fp32: the 16 bits are the high half of the fp32 pattern.
float widen_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Independent decoder: reads the row as little-endian int32 words.
float independent_value(const uint8_t* packed, const uint16_t* scales, int64_t cols, int64_t group, int64_t r,
                        int64_t c) {
  uint32_t word;
  std::memcpy(&word, packed + r * cols / 2 + (c / 8) * 4, 4);
  const int32_t q = static_cast<int32_t>((word >> (4 * (c % 8))) & 0xf) - 8;
  return static_cast<float>(q) * widen_bf16(scales[r * (cols / group) + c / group]);
}

// compressed-tensors pack_to_int32 for one row of signed int4 values.
std::vector<uint32_t> pack_to_int32(const std::vector<int>& q) {
  std::vector<uint32_t> words(q.size() / 8, 0);
  for (size_t k = 0; k < q.size(); ++k) words[k / 8] |= static_cast<uint32_t>(q[k] + 8) << (4 * (k % 8));
  return words;
}

TEST(Int4Group, DequantizeBitExactAgainstIndependentDecoder) {
  for (int64_t group : {32, 128}) {
    const int64_t rows = 37, cols = 256;
    std::mt19937 rng(static_cast<uint32_t>(group));
    std::vector<uint8_t> packed(static_cast<size_t>(rows * cols / 2));
    for (auto& b : packed) b = static_cast<uint8_t>(rng());
    std::vector<uint16_t> scales(static_cast<size_t>(rows * cols / group));
    std::uniform_real_distribution<float> u(-14.0f, 0.0f);
    for (auto& s : scales) s = f32_to_bf16((rng() % 2 ? -1.0f : 1.0f) * std::exp2(u(rng)));
    scales[3] = 0;       // +0
    scales[4] = 0x8000;  // -0
    const WeightView v = int4_group_view(packed.data(), scales.data(), rows, cols, group);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(v, r, row.data());
      for (int64_t c = 0; c < cols; ++c) {
        const float e = independent_value(packed.data(), scales.data(), cols, group, r, c);
        ASSERT_EQ(std::memcmp(&row[c], &e, 4), 0) << "g" << group << " r " << r << " c " << c;
      }
    }
  }
}

TEST(Int4Group, PackingMatchesCompressedTensorsWords) {
  const int64_t cols = 64;
  std::vector<float> w(static_cast<size_t>(cols));
  std::vector<int> q(static_cast<size_t>(cols));
  // Values that are exact multiples of the scale 1 (amax 7): q = w.
  for (int64_t k = 0; k < cols; ++k) {
    q[k] = static_cast<int>(k % 15) - 7;
    w[k] = static_cast<float>(q[k]);
  }
  std::vector<uint8_t> packed(static_cast<size_t>(cols / 2));
  std::vector<uint16_t> scales(2);
  int4_group_quantize(w.data(), 1, cols, 32, packed, scales);
  EXPECT_EQ(scales[0], 0x3f80);  // bf16 1.0
  const std::vector<uint32_t> words = pack_to_int32(q);
  EXPECT_EQ(0, std::memcmp(words.data(), packed.data(), packed.size()));
}

TEST(Int4Group, QuantizeRoundTripErrorBound) {
  const int64_t rows = 64, cols = 256;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& v : w) v = normal(rng);
  for (int64_t group : {32, 128}) {
    std::vector<uint8_t> packed(w.size() / 2);
    std::vector<uint16_t> scales(static_cast<size_t>(rows * cols / group));
    int4_group_quantize(w.data(), rows, cols, group, packed, scales);
    const WeightView v = int4_group_view(packed.data(), scales.data(), rows, cols, group);
    std::vector<float> row(static_cast<size_t>(cols));
    double sq = 0, ref = 0;
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(v, r, row.data());
      for (int64_t g = 0; g < cols / group; ++g) {
        float amax = 0;
        for (int64_t c = g * group; c < (g + 1) * group; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
        const uint16_t stored = scales[r * (cols / group) + g];
        EXPECT_EQ(stored, f32_to_bf16(amax / 7.0f));  // the documented scale
        const float s = widen_bf16(stored);
        for (int64_t c = g * group; c < (g + 1) * group; ++c) {
          const float x = w[r * cols + c];
          // No clipping: every element within half a step; |q| <= 7.
          ASSERT_LE(std::fabs(row[c] - x), 0.5f * s * 1.0001f) << r << "," << c;
          ASSERT_LE(std::fabs(row[c]), 7.0f * s);
          sq += (row[c] - x) * (row[c] - x);
          ref += x * x;
        }
      }
    }
    // Relative RMS error of 4-bit rounding of Gaussian groups: ~8% (g32) to ~10% (g128).
    EXPECT_LT(std::sqrt(sq / ref), group == 32 ? 0.11 : 0.14) << "g" << group;
  }
}

// quantize_matrix (quantize-on-load, `densa quantize`, gen-model) keeps the scales as bf16
// (2 bytes per group) and quantizes every value against the rounded scale: the stored scale is
// bf16(amax / 7), each code is clamp(round_half_even(w / s), -8, 7) for exactly that s, and
// dequantization gives code * s bit for bit. Groups: Gaussian, all negative, all zero, and
// scales outside fp16's range (~3e6 and ~2e-10), which an fp16 scale could not hold.
TEST(Int4Group, QuantizeMatrixStoresTheBf16ScaleTheValuesWereQuantizedWith) {
  const int64_t rows = 64, cols = 256;
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& v : w) v = normal(rng);
  for (int64_t c = 0; c < 128; ++c) {
    w[static_cast<size_t>(1 * cols + c)] = -std::fabs(w[static_cast<size_t>(1 * cols + c)]);  // negative groups
    w[static_cast<size_t>(2 * cols + c)] = 0.0f;                                             // zero groups
    w[static_cast<size_t>(3 * cols + c)] *= 1.4e8f;  // scales ~ 3e6 > 65504, fp16's largest
    w[static_cast<size_t>(4 * cols + c)] *= 1e-8f;   // scales ~ 2e-10 < 2^-24, fp16's smallest
  }
  for (int64_t group : {32, 128}) {
    SCOPED_TRACE("g" + std::to_string(group));
    const QuantizedMatrix q = quantize_matrix(w.data(), rows, cols, WeightQuantSpec{DType::kI4, static_cast<int>(group)});
    const WeightView& v = q.view;
    ASSERT_NE(v.scales_bf16, nullptr);
    EXPECT_EQ(v.scales_f32, nullptr);
    const int64_t groups = cols / group;
    EXPECT_EQ(v.num_scales(), rows * groups);
    EXPECT_EQ(v.scale_bytes(), rows * groups * 2);
    const std::vector<float> deq = dequantize_matrix(v);
    int64_t differs_from_unrounded = 0;
    bool saw_huge = false, saw_tiny = false;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        float amax = 0;
        for (int64_t c = g * group; c < (g + 1) * group; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
        const uint16_t stored = v.scales_bf16[r * groups + g];
        ASSERT_EQ(stored, f32_to_bf16(amax / 7.0f)) << r << "," << g;
        const float s = widen_bf16(stored);
        saw_huge |= s > 65504.0f;
        saw_tiny |= s > 0.0f && s < 0x1p-24f;
        for (int64_t c = g * group; c < (g + 1) * group; ++c) {
          const float x = w[r * cols + c];
          const int code = ((v.row_ptr(r)[c / 2] >> (4 * (c % 2))) & 0xf) - 8;
          const int expect = s > 0.0f ? static_cast<int>(std::clamp(std::nearbyint(x / s), -8.0f, 7.0f)) : 0;
          ASSERT_EQ(code, expect) << r << "," << c;
          const float value = static_cast<float>(code) * s;
          ASSERT_EQ(std::memcmp(&deq[r * cols + c], &value, 4), 0) << r << "," << c;
          if (amax > 0.0f && std::nearbyint(x / (amax / 7.0f)) != static_cast<float>(code)) ++differs_from_unrounded;
        }
      }
    }
    EXPECT_TRUE(saw_huge && saw_tiny);
    // The data is sensitive to the order: quantizing against the unrounded amax / 7 would pick
    // other codes for some elements.
    EXPECT_GT(differs_from_unrounded, 0);
  }
}

// GGUF Q4_0 repacked for the INT4 kernel: every element keeps its value bit for bit (the
// repacked view through int4_group_dequantize against the Q4_0 view through the Q4_0 decoder),
// over random bytes (every nibble, 0 = -8 included) and f16 scales of every kind: not exact in
// bf16 (10 mantissa bits), subnormal, the largest finite, negative (Q4_0's d = m / -8 is
// usually negative), +-0.
TEST(Int4Group, FromQ4_0KeepsEveryValue) {
  const int64_t rows = 7, cols = 96, blocks = rows * cols / 32;
  std::vector<uint8_t> q4 = testing::random_gguf_blocks(blocks, 18, 5);
  const WeightView q4_view{.dtype = DType::kQ4_0, .rows = rows, .cols = cols, .data = q4.data()};
  std::vector<uint8_t> packed(static_cast<size_t>(rows * cols / 2));
  std::vector<uint16_t> scales(static_cast<size_t>(blocks));
  int4_group_from_q4_0(q4.data(), rows, cols, packed, scales);
  const WeightView v = int4_group_view_f16(packed.data(), scales.data(), rows, cols);
  EXPECT_EQ(v.dtype, DType::kI4);
  EXPECT_EQ(v.bytes() + v.scale_bytes(), rows * cols / 32 * 18);  // the same 4.5 bits per weight
  std::vector<float> want(static_cast<size_t>(cols)), got(want.size());
  bool saw_not_bf16 = false;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(q4_view, r, want.data());
    dequantize_row(v, r, got.data());
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << "row " << r;
    for (int64_t g = 0; g < cols / 32; ++g) {
      const float s = int4_group_scale(v, r, g);
      saw_not_bf16 |= bf16_to_f32(f32_to_bf16(s)) != s;
    }
  }
  EXPECT_TRUE(saw_not_bf16);  // scales bf16 could not hold: why they stay f16
  // Element order by hand: block 0, element 1 is the low nibble of qs[1]; element 16 the high
  // nibble of qs[0]; in the repacked row they sit in byte 0 (high) and byte 8 (low).
  EXPECT_EQ(packed[0] >> 4, q4[2 + 1] & 0x0f);
  EXPECT_EQ(packed[8] & 0x0f, q4[2 + 0] >> 4);
}

// 8-row tiles (WeightLayout::kInt4Tiles8): every value and scale reads back the same in both
// layouts and both scale formats, the bytes sit where core/tensor_view.h says, and only INT4
// g32 with whole tiles (rows % 8, cols % 128) is tileable.
TEST(Int4Group, Tiles8KeepEveryValueWhereTheLayoutSays) {
  const int64_t rows = 24, cols = 384, groups = cols / 32;
  std::mt19937 rng(17);
  std::vector<uint8_t> packed(static_cast<size_t>(rows * cols / 2));
  for (auto& b : packed) b = static_cast<uint8_t>(rng());
  std::vector<uint16_t> scales(static_cast<size_t>(rows * groups));
  for (size_t i = 0; i < scales.size(); ++i) {
    scales[i] = i < std::size(testing::kSpecialF16Scales) ? testing::kSpecialF16Scales[i]
                                                           : static_cast<uint16_t>(rng() & 0x7bff);
  }
  WeightView f16 = int4_group_view_f16(packed.data(), scales.data(), rows, cols);
  WeightView bf16 = int4_group_view(packed.data(), scales.data(), rows, cols, 32);  // the same bits as bf16
  for (const WeightView& v : {f16, bf16}) {
    SCOPED_TRACE(v.scales_f16 != nullptr ? "f16" : "bf16");
    ASSERT_TRUE(int4_group_tileable(v));
    const int64_t n = int4_group_tile8_bytes(v);
    EXPECT_EQ(n, rows / 8 * (cols / 128) * 576);
    std::vector<uint8_t> storage;
    const std::span<uint8_t> tiles = testing::aligned_bytes(storage, n);
    const uint8_t* aligned = tiles.data();
    const WeightView t = int4_group_tile8(v, tiles);
    EXPECT_EQ(t.layout, WeightLayout::kInt4Tiles8);
    EXPECT_EQ(t.dtype, DType::kI4);
    EXPECT_EQ(t.bytes() + t.scale_bytes(), n);
    EXPECT_EQ(t.scales_f16 != nullptr, v.scales_f16 != nullptr);
    EXPECT_FALSE(int4_group_tileable(t));  // already tiled
    std::vector<float> want(static_cast<size_t>(cols)), got(want.size());
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(v, r, want.data());
      dequantize_row(t, r, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << "row " << r;
      for (int64_t g = 0; g < groups; ++g) {
        ASSERT_EQ(int4_group_scale(v, r, g), int4_group_scale(t, r, g)) << r << "," << g;
      }
    }
    // By hand: tile 1 (rows 8-15), chunk 2 (columns 256-383) starts at (1 * 3 + 2) * 576; its
    // row 3 (row 11) has code bytes 128-191 at +192, its scales (groups 8-11) at +512 + 24.
    const uint8_t* chunk = aligned + 5 * 576;
    EXPECT_EQ(0, std::memcmp(chunk + 3 * 64, packed.data() + 11 * cols / 2 + 128, 64));
    EXPECT_EQ(0, std::memcmp(chunk + 512 + 3 * 8, scales.data() + 11 * groups + 8, 8));
  }
  // Not tileable: rows not a multiple of 8, columns not a multiple of 128, groups of 128.
  EXPECT_FALSE(int4_group_tileable(int4_group_view_f16(packed.data(), scales.data(), 20, cols)));
  EXPECT_FALSE(int4_group_tileable(int4_group_view_f16(packed.data(), scales.data(), 16, 96)));
  EXPECT_FALSE(int4_group_tileable(int4_group_view(packed.data(), scales.data(), 16, 256, 128)));
}

TEST(Int4Group, MinusEightDecodes) {
  // Checkpoints from other tools may use q = -8 (nibble 0); it must decode to -8 * scale.
  std::vector<uint8_t> packed(16, 0x00);
  std::vector<uint16_t> scales(1, f32_to_bf16(0.25f));
  const WeightView v = int4_group_view(packed.data(), scales.data(), 1, 32, 32);
  std::vector<float> row(32);
  dequantize_row(v, 0, row.data());
  for (float x : row) ASSERT_EQ(x, -2.0f);
}

// matmul with INT4 weights == ref::matmul on the dequantized weights within the kernels' stated
// bound: the AVX-512 path quantizes x to int8 in blocks of 32 (W4A8, VNNI), so
// |y - ref| <= sum_k |w_k| * amax(x block of k) / 254 (+ fp32 rounding); the exact fallback is
// far inside it. Batch and thread invariant bit for bit.
TEST(Int4Matmul, MatchesReferenceAndIsBatchInvariant) {
  for (int64_t group : {32, 128}) {
    const int64_t rows = 96, cols = 384, n = 7;
    std::mt19937 rng(static_cast<uint32_t>(13 + group));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(n * cols));
    for (auto& v : w) v = normal(rng);
    for (auto& v : x) v = normal(rng);
    std::vector<uint8_t> packed(w.size() / 2);
    std::vector<uint16_t> scales(static_cast<size_t>(rows * cols / group));
    int4_group_quantize(w.data(), rows, cols, group, packed, scales);
    const WeightView v = int4_group_view(packed.data(), scales.data(), rows, cols, group);
    std::vector<float> y(static_cast<size_t>(n * rows)), yref(y.size()), y1(static_cast<size_t>(rows));
    matmul(v, x.data(), n, y.data(), nullptr);
    ref::matmul(v, x.data(), n, yref.data());
    std::vector<float> wrow(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(v, r, wrow.data());
      for (int64_t i = 0; i < n; ++i) {
        double mag = 0, act_bound = 0;
        for (int64_t k0 = 0; k0 < cols; k0 += 32) {
          double amax = 0;
          for (int64_t k = k0; k < k0 + 32; ++k) amax = std::max(amax, static_cast<double>(std::fabs(x[i * cols + k])));
          for (int64_t k = k0; k < k0 + 32; ++k) {
            mag += std::fabs(static_cast<double>(wrow[k]) * x[i * cols + k]);
            act_bound += std::fabs(static_cast<double>(wrow[k])) * amax / 254.0;
          }
        }
        ASSERT_LE(std::fabs(y[i * rows + r] - yref[i * rows + r]), act_bound + 1e-5 * mag) << i << "," << r;
      }
    }
    ThreadPool pool(3);
    std::vector<float> yp(y.size());
    matmul(v, x.data(), n, yp.data(), &pool);
    EXPECT_EQ(0, std::memcmp(y.data(), yp.data(), y.size() * 4));
    for (int64_t i = 0; i < n; ++i) {
      matmul(v, x.data() + i * cols, 1, y1.data(), nullptr);
      ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + i * rows, y1.size() * 4)) << "row " << i;
    }
  }
}

}  // namespace
}  // namespace densa
