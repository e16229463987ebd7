// The real `densa generate` binary: greedy text equals the golden continuation, per-worker
// weight precision is selectable, and bad flags / files give one clear line and exit 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <sys/wait.h>
#include <cstdio>
#include <string>

#include "cli/cli_run.h"
#include "test_util.h"

namespace densa {
namespace {

const std::string kPrompt = "Once upon a time, there was a little girl named Lily.";

TEST(GenerateCli, DefaultModelGreedyMatchesGolden) {
  const auto golden = testing::read_json(testing::model_dir("tinystories-mixtral-3.6m") / "golden" / "golden.json");
  const std::string want = golden["prompts"][0]["full_text"].get<std::string>();
  const RunResult r = run("generate -n 48 --ignore-eos -p \"" + kPrompt + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, want + "\n");
}

TEST(GenerateCli, QuantizedWeightsRunAndStayOnTopic) {
  const std::string model = (testing::model_dir("tinystories-mixtral-3.6m") / "hf").string();
  for (const char* dtype : {"fp8", "int4"}) {
    const RunResult r = run("generate -m " + model + " --weight-dtype " + dtype + " -n 8 -p \"" + kPrompt + "\"");
    ASSERT_EQ(r.exit_code, 0) << dtype << ": " << r.output;
    EXPECT_EQ(r.output.rfind(kPrompt, 0), 0u) << r.output;
    EXPECT_GT(r.output.size(), kPrompt.size() + 8) << r.output;
  }
}

TEST(GenerateCli, BadWeightDtypeIsOneLineError) {
  const RunResult r = run("generate --weight-dtype int3 -n 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output,
            "densa generate: --weight-dtype must be bf16, fp8, int4, int4-g32, int4-g128, q8_0 or q4_0, not \"int3\"\n");
}

TEST(GenerateCli, LmHeadDtypeRunsAndBadOnesAreOneLineErrors) {
  const std::string model = (testing::model_dir("tinystories-llama-1m") / "hf").string();
  const RunResult ok = run("generate -m " + model + " --weight-dtype int4 --weight-group-size 32 --lm-head-dtype int4 "
                           "-n 8 -p \"" + kPrompt + "\"");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.output.rfind(kPrompt, 0), 0u) << ok.output;
  EXPECT_GT(ok.output.size(), kPrompt.size() + 8) << ok.output;
  const RunResult bad = run("generate -m " + model + " --lm-head-dtype f16 -n 2");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.output,
            "densa generate: --lm-head-dtype must be bf16, fp8, int4, int4-g32, int4-g128, q8_0 or q4_0, not \"f16\"\n");
}

TEST(GenerateCli, MissingModelIsOneLineError) {
  const RunResult r = run("generate -m /nonexistent/model.gguf -n 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/model.gguf"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

}  // namespace
}  // namespace densa
