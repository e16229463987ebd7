// The weight-format vocabulary shared by --weight-dtype, --lm-head-dtype, `densa eval` and the
// writers: names parse to the right spec, print back to a name that parses to the same spec,
// and `weight_view_in_format` tells a matrix already in a format from one that needs converting.
#include "quant/quantize_matrix.h"

#include <gtest/gtest.h>

namespace densa {
namespace {

TEST(WeightQuantSpecName, ParsesEveryNameAndRoundTrips) {
  struct Case {
    const char* name;
    DType dtype;
    int group;  // checked for int4 only
  };
  for (const Case& c : {Case{"bf16", DType::kBF16, 0}, Case{"fp8", DType::kFP8E4M3, 0}, Case{"int4", DType::kI4, 32},
                        Case{"int4-g32", DType::kI4, 32}, Case{"int4-g128", DType::kI4, 128},
                        Case{"q8_0", DType::kQ8_0, 0}, Case{"q4_0", DType::kQ4_0, 0}}) {
    Result<WeightQuantSpec> s = weight_quant_spec_from_name(c.name, 32);  // plain "int4" takes the given group
    ASSERT_TRUE(s.is_ok()) << c.name;
    EXPECT_EQ(s->dtype, c.dtype) << c.name;
    if (c.dtype == DType::kI4) {
      EXPECT_EQ(s->group_size, c.group) << c.name;
    }
    EXPECT_TRUE(check_quant_target(*s, 64, 128).is_ok()) << c.name;
    Result<WeightQuantSpec> back = weight_quant_spec_from_name(weight_quant_spec_name(*s), 128);
    ASSERT_TRUE(back.is_ok()) << weight_quant_spec_name(*s);
    EXPECT_EQ(back->dtype, s->dtype);
    if (c.dtype == DType::kI4) {
      EXPECT_EQ(back->group_size, s->group_size);
    }
  }
  EXPECT_EQ(weight_quant_spec_from_name("int4", 128)->group_size, 128);
  EXPECT_EQ(weight_quant_spec_name({DType::kI4, 32}), "int4-g32");
  for (const char* bad : {"", "f16", "f32", "int4-g64", "INT4", "fp8 "}) {
    Result<WeightQuantSpec> s = weight_quant_spec_from_name(bad, 128);
    ASSERT_FALSE(s.is_ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(), std::string("must be bf16, fp8, int4, int4-g32, int4-g128, q8_0 or q4_0, not \"") +
                                         bad + "\"");
  }
}

TEST(WeightQuantSpecName, InFormatNeedsTheSameGroupAndBlocks) {
  std::vector<float> values(64 * 128);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  const QuantizedMatrix g32 = quantize_matrix(values.data(), 64, 128, {DType::kI4, 32});
  EXPECT_TRUE(weight_view_in_format(g32.view, {DType::kI4, 32}));
  EXPECT_FALSE(weight_view_in_format(g32.view, {DType::kI4, 128}));
  EXPECT_FALSE(weight_view_in_format(g32.view, {DType::kFP8E4M3}));
  const QuantizedMatrix fp8 = quantize_matrix(values.data(), 64, 128, {DType::kFP8E4M3});
  EXPECT_TRUE(weight_view_in_format(fp8.view, {DType::kFP8E4M3}));
  WeightView other_blocks = fp8.view;  // a checkpoint with another block size
  other_blocks.scale_rows = other_blocks.scale_cols = 64;
  EXPECT_FALSE(weight_view_in_format(other_blocks, {DType::kFP8E4M3}));
  const WeightView f32{.dtype = DType::kF32, .rows = 64, .cols = 128, .data = values.data()};
  EXPECT_FALSE(weight_view_in_format(f32, {DType::kBF16}));
  const QuantizedMatrix bf16 = quantize_matrix(values.data(), 64, 128, {DType::kBF16});
  EXPECT_TRUE(weight_view_in_format(bf16.view, {DType::kBF16}));
}

}  // namespace
}  // namespace densa
