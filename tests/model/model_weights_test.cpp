// ModelWeights::weight_bytes counts the scales of FP8 block-scaled and INT4 group-wise matrices.
#include "model/model_weights.h"

#include <gtest/gtest.h>

#include <vector>

#include "quant/fp8_block.h"
#include "quant/int4_group.h"

namespace densa {
namespace {

TEST(ModelWeightsBytes, CountsQuantizationScales) {
  std::vector<uint8_t> codes(256 * 300);
  std::vector<float> scales(256 * 300);
  ModelWeights w;
  w.final_norm.assign(8, 1.0f);
  w.layers.resize(1);
  // INT4 g32: 64 x 256 -> 64 * 128 code bytes + 64 * 8 scales.
  w.layers[0].expert_down.push_back(int4_group_view(codes.data(), scales.data(), 64, 256, 32));
  // FP8: 200 x 300 -> 60000 code bytes + ceil(200/128) * ceil(300/128) = 2 * 3 scales.
  w.layers[0].expert_up.push_back(fp8_block_view(codes.data(), scales.data(), 200, 300));
  EXPECT_EQ(w.weight_bytes(), 8 * 4 + (64 * 128 + 64 * 8 * 4) + (60000 + 6 * 4));
}

}  // namespace
}  // namespace densa
