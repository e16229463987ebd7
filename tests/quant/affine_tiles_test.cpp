// Affine rows in 16-row tiles (quant/affine_tiles.h): the tiled copy, the in-place tiling and
// the row-major matrix hold the same values, block for block, for every affine dtype.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/affine_matrices.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"
#include "quant/dequantize.h"
#include "test_util.h"

namespace densa {
namespace {

TEST(AffineTiles, HoldTheRowsValuesInBothTilings) {
  for (uint32_t type : testing::kAffineGgmlTypes) {
    for (AffineWidth width : {AffineWidth::kPacked, AffineWidth::kWide}) {
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 256}, {48, 512}}) {
        testing::AffineMatrix m = testing::affine_matrix(type, rows, cols, static_cast<uint32_t>(type + rows), width);
        SCOPED_TRACE(std::string(ggml_block_format(type)->name) + " as " + std::string(dtype_name(m.view.dtype)) +
                     " " + std::to_string(rows) + "x" + std::to_string(cols));
        ASSERT_TRUE(affine_tileable(m.view));
        std::vector<uint8_t> storage;
        const WeightView t = affine_tile16(m.view, testing::aligned_bytes(storage, m.view.bytes()));
        ASSERT_EQ(t.layout, WeightLayout::kAffineTiles16);
        EXPECT_NE(0, std::memcmp(t.data, m.bytes.data(), static_cast<size_t>(m.view.bytes())))
            << "the tiles reorder the bytes";
        const int64_t bb = dtype_block_bytes(m.view.dtype);
        std::vector<uint8_t> block(static_cast<size_t>(bb));
        std::vector<float> a(static_cast<size_t>(cols)), b(a.size()), part(40);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t k = 0; k < cols / kAffineBlock; ++k) {
            affine_row_block(t, r, k, block.data());
            ASSERT_EQ(0, std::memcmp(block.data(), m.view.row_ptr(r) + k * bb, static_cast<size_t>(bb)))
                << "row " << r << " block " << k;
          }
          dequantize_row(m.view, r, a.data());
          dequantize_row(t, r, b.data());
          ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "row " << r;
          dequantize_row_range(t, r, 100, 40, part.data());  // across a block boundary
          ASSERT_EQ(0, std::memcmp(part.data(), a.data() + 100, part.size() * 4)) << "row " << r;
        }
        // In place: the same bytes as the copy, at the matrix's own address.
        std::vector<uint8_t> own;
        std::span<uint8_t> buf = testing::aligned_bytes(own, m.view.bytes());
        std::memcpy(buf.data(), m.bytes.data(), buf.size());
        WeightView v = m.view;
        v.data = buf.data();
        const WeightView in_place = affine_tile16_in_place(v, buf.data());
        EXPECT_EQ(in_place.data, buf.data());
        EXPECT_EQ(in_place.layout, WeightLayout::kAffineTiles16);
        EXPECT_EQ(0, std::memcmp(buf.data(), t.data, buf.size()));
      }
    }
  }
}

TEST(AffineTiles, OnlyWholeSixteenRowTilesOfRowMajorAffineRows) {
  testing::AffineMatrix m = testing::affine_matrix(ggml_type::kQ4_K, 24, 256, 3);
  EXPECT_FALSE(affine_tileable(m.view));  // 24 rows
  m.view.rows = 16;
  EXPECT_TRUE(affine_tileable(m.view));
  std::vector<uint8_t> storage;
  const WeightView t = affine_tile16(m.view, testing::aligned_bytes(storage, m.view.bytes()));
  EXPECT_FALSE(affine_tileable(t));  // already tiled
  WeightView f = m.view;
  f.dtype = DType::kF32;
  EXPECT_FALSE(affine_tileable(f));
}

}  // namespace
}  // namespace densa
