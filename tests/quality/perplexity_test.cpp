// Validation perplexity of both fixtures, computed as the fixture README prescribes, equals
// the independent PyTorch reference within 0.1%.
#include "quality/perplexity.h"

#include <gtest/gtest.h>

#include "model/model_loader.h"
#include "test_util.h"

namespace densa {
namespace {

void check_ppl(const std::string& model, const std::string& path, const char* ref_key) {
  auto loaded = load_model(testing::model_dir(model) / path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const auto ids = testing::validation_ids(model);
  const auto ref = testing::read_json(testing::model_dir(model) / "golden" / "ppl.json")[ref_key];
  ThreadPool pool(0);
  const PerplexityResult r = compute_perplexity(loaded.value(), ids, PerplexityOptions{}, &pool);
  EXPECT_EQ(r.num_windows, 64);
  EXPECT_EQ(r.num_scored_all, ref["all_positions"]["count"].get<int64_t>());
  EXPECT_EQ(r.num_scored_half, ref["second_half"]["count"].get<int64_t>());
  const double want_all = ref["all_positions"]["ppl"].get<double>();
  const double want_half = ref["second_half"]["ppl"].get<double>();
  EXPECT_NEAR(r.ppl_all, want_all, want_all * 1e-3);
  EXPECT_NEAR(r.ppl_second_half, want_half, want_half * 1e-3);
}

TEST(Perplexity, DenseF32MatchesReference) { check_ppl("tinystories-llama-1m", "hf", "fp32_weights"); }
TEST(Perplexity, MoeF32MatchesReference) { check_ppl("tinystories-mixtral-3.6m", "hf", "fp32_weights"); }
TEST(Perplexity, MoeGgufF16MatchesReference) {
  check_ppl("tinystories-mixtral-3.6m", "gguf/tinystories-mixtral-3.6m-f16.gguf", "f16_rounded_weights_fp32_compute");
}

TEST(Perplexity, DenseBf16MatchesReference) {
  check_ppl("tinystories-llama-1m", "hf-bf16", "bf16_rounded_weights_fp32_compute");
}

}  // namespace
}  // namespace densa
