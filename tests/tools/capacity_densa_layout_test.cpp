// `densa capacity --layout densa --tp T --ep E` against what the runtime holds: each rank's
// slice loaded by shard_weights (model/shard.h, as `mpirun ... densa serve --tp --ep` loads
// it) at BF16, its bytes measured, the largest rank compared with the planner's per-rank
// estimate. The planner counts norms at BF16 and the runtime keeps them as fp32 vectors, so
// the two differ by those few KB; kTolerance states how much.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/model_loader.h"
#include "test_util.h"
#include "tools/capacity/capacity.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

constexpr double kTolerance = 0.01;  // relative

struct Case {
  std::string name;
  fs::path path;
  int tp;
  int ep;
};

class CapacityDensaLayout : public ::testing::TestWithParam<Case> {};

TEST_P(CapacityDensaLayout, PerRankWeightBytesMatchTheLoadedSlices) {
  const Case& c = GetParam();
  int64_t largest = 0;
  for (int r = 0; r < c.tp * c.ep; ++r) {
    LoadOptions o;
    o.weight_dtype = DType::kBF16;
    o.parallel = ParallelLayout::of_rank(c.tp, c.ep, r);
    auto w = load_model(c.path, o);
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    largest = std::max(largest, w->weight_bytes());
  }
  auto m = load_capacity_model(c.path);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const WeightEstimate e = estimate_weight_bytes(*m, WeightFormat::kBF16, std::nullopt,
                                                 Parallelism{c.tp, c.ep, ParallelLayoutKind::kTpTimesEp});
  const double rel = std::abs(static_cast<double>(e.bytes() - largest)) / static_cast<double>(largest);
  EXPECT_LE(rel, kTolerance) << c.name << ": planner " << e.bytes() << " bytes per rank, loaded " << largest;
  std::printf("[ note ] %s tp %d ep %d: planner %lld, largest loaded slice %lld bytes (%.2f%% apart)\n", c.name.c_str(),
              c.tp, c.ep, static_cast<long long>(e.bytes()), static_cast<long long>(largest), 100 * rel);
  // With expert groups, the other layout (EP inside the TP group) would not match: the check
  // can fail. (Without them the two agree: both split every head, width and the vocabulary.)
  if (c.tp > 1 && c.ep > 1) {
    const WeightEstimate other = estimate_weight_bytes(*m, WeightFormat::kBF16, std::nullopt, Parallelism{c.tp, 1});
    EXPECT_GT(std::abs(static_cast<double>(other.bytes() - largest)) / static_cast<double>(largest), kTolerance);
  }
}

fs::path fixture(const std::string& name) { return testing::model_dir(name) / "gguf" / (name + "-f16.gguf"); }
fs::path reference(const std::string& arch) { return fs::path(DENSA_SOURCE_DIR) / "tests/data/reference" / arch; }

INSTANTIATE_TEST_SUITE_P(
    Layouts, CapacityDensaLayout,
    ::testing::Values(Case{"llama_tp2", fixture("tinystories-llama-1m"), 2, 1},
                      Case{"mixtral_tp2", fixture("tinystories-mixtral-3.6m"), 2, 1},
                      Case{"mixtral_ep2", fixture("tinystories-mixtral-3.6m"), 1, 2},
                      Case{"mixtral_tp2_ep2", fixture("tinystories-mixtral-3.6m"), 2, 2},
                      Case{"qwen2_moe_tp2_ep2", reference("qwen2_moe"), 2, 2},
                      Case{"glm4_moe_tp2_ep2", reference("glm4_moe"), 2, 2},
                      Case{"deepseek_v3_ep2", reference("deepseek_v3"), 1, 2},
                      Case{"deepseek_v3_tp2_ep2", reference("deepseek_v3"), 2, 2},
                      Case{"glm_moe_dsa_tp2", reference("glm_moe_dsa"), 2, 1}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace densa
