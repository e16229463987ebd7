// ModelWeights::weight_bytes counts the scales of FP8 block-scaled (fp32) and INT4 group-wise
// (bf16) matrices as held in memory.
#include "model/model_weights.h"

#include <gtest/gtest.h>

#include <vector>

#include "quant/fp8_block.h"
#include "quant/int4_group.h"

namespace densa {
namespace {

TEST(ModelWeightsBytes, CountsQuantizationScales) {
  std::vector<uint8_t> codes(256 * 300);
  std::vector<float> scales_f32(6);
  std::vector<uint16_t> scales_bf16(64 * 8);
  ModelWeights w;
  w.final_norm.assign(8, 1.0f);
  w.layers.resize(1);
  // INT4 g32: 64 x 256 -> 64 * 128 code bytes + 64 * 8 bf16 scales (4.5 bits per weight).
  w.layers[0].expert_down.push_back(int4_group_view(codes.data(), scales_bf16.data(), 64, 256, 32));
  EXPECT_EQ(w.layers[0].expert_down[0].scale_bytes(), 64 * 8 * 2);
  // FP8: 200 x 300 -> 60000 code bytes + ceil(200/128) * ceil(300/128) = 2 * 3 fp32 scales.
  w.layers[0].expert_up.push_back(fp8_block_view(codes.data(), scales_f32.data(), 200, 300));
  EXPECT_EQ(w.layers[0].expert_up[0].scale_bytes(), 6 * 4);
  EXPECT_EQ(w.weight_bytes(), 8 * 4 + (64 * 128 + 64 * 8 * 2) + (60000 + 6 * 4));
  EXPECT_EQ((64 * 128 + 64 * 8 * 2) * 8, 64 * 256 * 9 / 2);  // 4.5 bits per weight
}

}  // namespace
}  // namespace densa
