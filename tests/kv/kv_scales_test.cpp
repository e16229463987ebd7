// KvScales: scale arithmetic, validation, the start-up mode line, and the caches refusing an
// FP8 KV without honest scales.
#include "kv/kv_scales.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kv/contiguous_kv_cache.h"
#include "quant/fp8.h"

namespace densa {
namespace {

TEST(KvScales, FromAmaxIsAmaxTimesMarginOver448) {
  const std::vector<float> amax = {448.0f, 8.96f, 1.0f, 0.0f};  // 1 layer x k|v x 2 heads
  const KvScales s = kv_scales_from_amax(amax, 1, 2, 1.0f, KvScaleSource::kCalibration, 100);
  ASSERT_EQ(s.values.size(), 4u);
  EXPECT_EQ(s.at(0, 0, 0), 1.0f);
  EXPECT_FLOAT_EQ(s.at(0, 0, 1), 0.02f);
  EXPECT_FLOAT_EQ(s.at(0, 1, 0), 1.0f / 448.0f);
  EXPECT_FLOAT_EQ(s.at(0, 1, 1), kKvMinAmax / 448.0f);  // never 0, never a silent 1.0
  EXPECT_TRUE(validate_kv_scales(s, 1, 2).is_ok());
  const KvScales m = kv_scales_from_amax(amax, 1, 2, 1.25f, KvScaleSource::kCalibration, 100);
  EXPECT_FLOAT_EQ(m.at(0, 0, 1), 8.96f * 1.25f / 448.0f);
  // The calibrated maximum itself encodes to (at most) the largest fp8 value, no clipping.
  EXPECT_EQ(fp8_e4m3_to_f32(fp8_e4m3_from_f32(8.96f / s.at(0, 0, 1))), kFp8E4M3Max);
}

TEST(KvScales, ValidateRejectsWrongShapeAndBadValues) {
  KvScales s{2, 2, std::vector<float>(8, 0.01f), KvScaleSource::kGiven, 0};
  EXPECT_TRUE(validate_kv_scales(s, 2, 2).is_ok());
  EXPECT_FALSE(validate_kv_scales(s, 2, 4).is_ok());
  EXPECT_FALSE(validate_kv_scales(s, 3, 2).is_ok());
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::nanf("")}) {
    KvScales b = s;
    b.values[5] = bad;
    EXPECT_FALSE(validate_kv_scales(b, 2, 2).is_ok()) << bad;
  }
}

TEST(KvScales, ModeLineSaysWhichModeIsInForce) {
  EXPECT_EQ(kv_cache_mode_line(DType::kBF16, KvScaleMode::kNone, nullptr), "kv cache: bf16");
  EXPECT_EQ(kv_cache_mode_line(DType::kFP8E4M3, KvScaleMode::kDynamic, nullptr),
            "kv cache: fp8_e4m3, dynamic per-token scales (one per token per kv head, amax/448)");
  const KvScales cal = kv_scales_from_amax(std::vector<float>{4.48f, 8.96f}, 1, 1, 1.0f,
                                           KvScaleSource::kCalibration, 2048);
  EXPECT_EQ(kv_cache_mode_line(DType::kFP8E4M3, KvScaleMode::kStatic, &cal),
            "kv cache: fp8_e4m3, static scales from calibration on 2048 tokens (k 0.01..0.01, v 0.02..0.02)");
  KvScales ck = cal;
  ck.source = KvScaleSource::kCheckpoint;
  EXPECT_EQ(kv_cache_mode_line(DType::kFP8E4M3, KvScaleMode::kStatic, &ck).rfind(
                "kv cache: fp8_e4m3, static scales from the checkpoint (", 0),
            0u);
}

TEST(KvScalesDeathTest, Fp8CacheNeedsHonestScales) {
  EXPECT_DEATH(ContiguousKvCache(1, 1, 16, 8, 1, DType::kFP8E4M3), "needs static or dynamic");
  EXPECT_DEATH(ContiguousKvCache(1, 1, 16, 8, 1, DType::kFP8E4M3, KvScaleMode::kStatic), "static kv scales");
  const std::vector<float> zero(2, 0.0f);
  EXPECT_DEATH(ContiguousKvCache(1, 1, 16, 8, 1, DType::kFP8E4M3, KvScaleMode::kStatic, zero),
               "static kv scale");
  EXPECT_DEATH(ContiguousKvCache(1, 1, 16, 8, 1, DType::kBF16, KvScaleMode::kDynamic), "only an fp8");
  const std::vector<float> ok = {0.5f, 0.25f};
  const ContiguousKvCache c(1, 1, 16, 8, 1, DType::kFP8E4M3, KvScaleMode::kStatic, ok);
  ASSERT_NE(c.view().static_scales, nullptr);
  EXPECT_EQ(c.view().static_scales[1], 0.25f);
}

}  // namespace
}  // namespace densa
