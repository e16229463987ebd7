// Affine rows (quant/affine_rows.h): every GGUF block format they take converts without loss, in
// both widths (4-bit codes where the format has them, 8-bit for all).
// The oracle is llama.cpp's own ggml dequantizer (tests/data/ggml_quants/ggml_reference.gguf,
// blocks ggml quantized and random blocks, with the fp32 values ggml gives) and densa's
// reference dequantizers (quant/ggml_blocks.h) on blocks of densa's reference quantizers:
// fmaf(scale, code, min) must be those values bit for bit (up to the sign of a zero).
#include "quant/affine_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "io/gguf_file.h"
#include "quant/ggml_blocks.h"

namespace densa {
namespace {

// Converts `blocks` (rows x cols elements of `fm`) in both widths and checks every element
// against `want`.
void expect_lossless(const GgmlBlockFormat& fm, const uint8_t* blocks, int64_t rows, int64_t cols, const float* want,
                     const std::string& name) {
  for (AffineWidth width : {AffineWidth::kPacked, AffineWidth::kWide}) {
    const std::optional<DType> t = affine_dtype_for_ggml(fm.type, width);
    ASSERT_TRUE(t.has_value()) << name;
    const std::string what = name + " as " + std::string(dtype_name(*t));
    std::vector<uint8_t> a8(static_cast<size_t>(rows * dtype_row_bytes(*t, cols)));
    ASSERT_TRUE(affine_from_ggml(fm.type, *t, blocks, rows, cols, a8.data())) << what;
    std::vector<float> got(static_cast<size_t>(cols));
    int mismatches = 0;
    for (int64_t r = 0; r < rows; ++r) {
      // Whole row, and an unaligned middle range (what the embedding lookup and fallback read).
      affine_dequantize(*t, a8.data() + r * dtype_row_bytes(*t, cols), 0, cols, got.data());
      for (int64_t k = 0; k < cols; ++k) {
        // Bit for bit, except the sign of an exact zero: ggml's (q - 16) * d is -0 for d < 0, the
        // correctly rounded fmaf(d, 16, -16 d) is +0. No sum can tell them apart (x + -0 == x).
        const float w = want[r * cols + k];
        const bool same = bits_from_f32(got[k]) == bits_from_f32(w) || (got[k] == 0.0f && w == 0.0f);
        if (!same && mismatches++ < 5) {
          ADD_FAILURE() << what << " row " << r << " col " << k << ": affine " << got[k] << " want " << w;
        }
      }
      float mid[40];
      affine_dequantize(*t, a8.data() + r * dtype_row_bytes(*t, cols), 60, 40, mid);
      EXPECT_EQ(0, std::memcmp(mid, got.data() + 60, sizeof(mid))) << what;
    }
    EXPECT_EQ(mismatches, 0) << what;
  }
}

TEST(AffineRows, EveryConvertibleFormatEqualsGgmlBitForBit) {
  const std::string path = std::string(DENSA_SOURCE_DIR) + "/tests/data/ggml_quants/ggml_reference.gguf";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  int checked = 0;
  for (const GgmlBlockFormat& fm : ggml_block_formats()) {
    for (const char* kind : {"quant", "quant.imat", "random"}) {
      const std::string name = std::string(fm.name) + "." + kind;
      auto q = f->tensor_bytes(name);
      auto want = f->tensor(name + ".ggml");
      ASSERT_TRUE(q.is_ok() && want.is_ok()) << name;
      const int64_t n = want->numel(), cols = 256;
      ASSERT_EQ(n % cols, 0) << name;
      std::vector<float> values(static_cast<size_t>(n));
      std::memcpy(values.data(), want->data, static_cast<size_t>(n) * 4);
      std::vector<uint8_t> blocks(q->data, q->data + n / fm.block_elems * fm.block_bytes);
      if (fm.type == ggml_type::kMXFP4) {
        // Random E8M0 bytes include exponents whose bias term 12 * 2^(e - 128) overflows fp32
        // (e >= 253): refused (see NonFiniteScalesAreRefused), so check them clamped, against
        // densa's reference dequantizer (itself ggml's values bit for bit, ggml_blocks_test).
        bool overflow = false;
        for (size_t b = 0; b < blocks.size(); b += static_cast<size_t>(fm.block_bytes)) {
          overflow = overflow || blocks[b] >= 253;
          blocks[b] = std::min<uint8_t>(blocks[b], 252);
        }
        std::vector<uint8_t> a8(static_cast<size_t>(n / cols * dtype_row_bytes(DType::kA8G32, cols)));
        EXPECT_EQ(affine_from_ggml(fm.type, DType::kA8G32, q->data, n / cols, cols, a8.data()), !overflow) << name;
        fm.dequantize(blocks.data(), n, values.data());
      }
      expect_lossless(fm, blocks.data(), n / cols, cols, values.data(), name);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 33);
}

TEST(AffineRows, ReferenceQuantizedRowsOfEveryFormatAndWidth) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (const GgmlBlockFormat& fm : ggml_block_formats()) {
    for (int64_t cols : {128, 256, 768, 2048}) {
      if (cols % fm.block_elems != 0) continue;
      const int64_t rows = 3;
      std::vector<float> src(static_cast<size_t>(rows * cols));
      for (float& v : src) v = nd(rng);
      src[5] = 0.3f;  // an outlier: a wide range in one group
      std::vector<uint8_t> blocks(static_cast<size_t>(rows * cols / fm.block_elems * fm.block_bytes));
      fm.quantize(src.data(), rows * cols, blocks.data());
      std::vector<float> want(src.size());
      fm.dequantize(blocks.data(), rows * cols, want.data());
      expect_lossless(fm, blocks.data(), rows, cols, want.data(), std::string(fm.name) + " cols " + std::to_string(cols));
    }
  }
}

TEST(AffineRows, FormsOfEachFormatAndFormatsWithoutOne) {
  const std::vector<std::tuple<uint32_t, DType, DType>> forms = {
      {ggml_type::kQ2_K, DType::kA8K16, DType::kA8K16},    {ggml_type::kQ3_K, DType::kA8K16, DType::kA8K16},
      {ggml_type::kQ6_K, DType::kA8K16, DType::kA8K16},    {ggml_type::kQ5_0, DType::kA8G32, DType::kA8G32},
      {ggml_type::kQ5_1, DType::kA8G32, DType::kA8G32},    {ggml_type::kQ5_K, DType::kA8K32, DType::kA8K32},
      {ggml_type::kQ4_1, DType::kA4G32, DType::kA8G32},    {ggml_type::kQ4_K, DType::kA4K, DType::kA8K32},
      {ggml_type::kIQ4_NL, DType::kA4IQ4, DType::kA8G32},  {ggml_type::kIQ4_XS, DType::kA4KIQ4, DType::kA8K32},
      {ggml_type::kMXFP4, DType::kA4MXFP4, DType::kA8G32},
  };
  for (const auto& [type, packed, wide] : forms) {
    EXPECT_EQ(affine_dtype_for_ggml(type, AffineWidth::kPacked), packed) << type;
    EXPECT_EQ(affine_dtype_for_ggml(type, AffineWidth::kWide), wide) << type;
  }
  // Q8_0 / Q4_0 have their own repacked forms; F32 / F16 / BF16 are not block formats.
  for (uint32_t t : {ggml_type::kQ8_0, ggml_type::kQ4_0, ggml_type::kF32, ggml_type::kF16, ggml_type::kBF16}) {
    EXPECT_FALSE(affine_dtype_for_ggml(t).has_value()) << t;
  }
  EXPECT_EQ(dtype_row_bytes(DType::kA4K, 256), 160);    // 5 bits per weight
  EXPECT_EQ(dtype_row_bytes(DType::kA4G32, 256), 192);  // 6
  EXPECT_EQ(dtype_row_bytes(DType::kA8K32, 256), 288);  // 9
  EXPECT_EQ(dtype_row_bytes(DType::kA8K16, 256), 304);  // 9.5
  EXPECT_EQ(dtype_row_bytes(DType::kA8G32, 256), 320);  // 10
}

// A block whose f16 scale is infinite or NaN has no exact affine form (inf * code + -inf is NaN
// where ggml gives inf): the conversion says so and the loader keeps such a tensor in fp32.
TEST(AffineRows, NonFiniteScalesAreRefused) {
  const GgmlBlockFormat& fm = *ggml_block_format(ggml_type::kQ4_K);
  std::vector<float> src(256, 0.01f);
  std::vector<uint8_t> blocks(static_cast<size_t>(fm.block_bytes));
  fm.quantize(src.data(), 256, blocks.data());
  std::vector<uint8_t> out(static_cast<size_t>(dtype_row_bytes(DType::kA8G32, 256)));
  ASSERT_TRUE(affine_from_ggml(fm.type, DType::kA8K32, blocks.data(), 1, 256, out.data()));
  for (uint16_t bad : {uint16_t{0x7c00}, uint16_t{0x7e00}}) {  // f16 +inf, NaN as d
    std::vector<uint8_t> b = blocks;
    std::memcpy(b.data(), &bad, 2);
    EXPECT_FALSE(affine_from_ggml(fm.type, DType::kA8K32, b.data(), 1, 256, out.data())) << bad;
    EXPECT_FALSE(affine_from_ggml(fm.type, DType::kA4K, b.data(), 1, 256, out.data())) << bad;
  }
  // MXFP4 with the largest E8M0 exponent: 2^127 is finite, but its bias term 12 * 2^127 is not.
  const GgmlBlockFormat& mx = *ggml_block_format(ggml_type::kMXFP4);
  std::vector<uint8_t> m(static_cast<size_t>(4 * mx.block_bytes), 0);
  for (int b = 0; b < 4; ++b) m[static_cast<size_t>(b * mx.block_bytes)] = 120;
  EXPECT_TRUE(affine_from_ggml(mx.type, DType::kA4MXFP4, m.data(), 1, 128, out.data()));
  m[static_cast<size_t>(2 * mx.block_bytes)] = 255;
  EXPECT_FALSE(affine_from_ggml(mx.type, DType::kA4MXFP4, m.data(), 1, 128, out.data()));
}

}  // namespace
}  // namespace densa
