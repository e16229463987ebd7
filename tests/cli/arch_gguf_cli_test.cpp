// `densa quantize HF_DIR OUT.gguf --to bf16|q8_0` and `densa info -m OUT.gguf` (the real
// binary) on the tiny qwen3_moe / qwen2_moe / glm4_moe / deepseek_v3 reference checkpoints.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cli/cli_run.h"

namespace densa {
namespace {

std::string ref_dir(const std::string& arch) {
  return (std::filesystem::path(DENSA_SOURCE_DIR) / "tests" / "data" / "reference" / arch).string();
}

struct GgufCliCase {
  std::string dir, hf_name;
};

class ArchGgufCli : public ::testing::TestWithParam<GgufCliCase> {};

TEST_P(ArchGgufCli, QuantizeToGgufThenInfo) {
  const auto& [dir, hf_name] = GetParam();
  for (const std::string to : {"bf16", "q8_0"}) {
    const std::string out =
        (std::filesystem::path(::testing::TempDir()) /
         ("densa_cli_" + dir + "_" + to + "_" + std::to_string(::getpid()) + ".gguf")).string();
    const RunResult q = run("quantize " + ref_dir(dir) + " " + out + " --to " + to);
    ASSERT_EQ(q.exit_code, 0) << q.output;
    EXPECT_NE(q.output.find("wrote " + out), std::string::npos) << q.output;
    const RunResult r = run("info -m " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("(gguf)"), std::string::npos) << r.output;
    const std::string attention = hf_name == "DeepseekV3ForCausalLM" ? "MLA" : "GQA";
    EXPECT_NE(r.output.find("architecture:   " + hf_name + " (attention " + attention + ")\n"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("experts:        8 (top-2 per token"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(to == "bf16" ? "matrix dtypes:  bf16=" : " q8_0="), std::string::npos) << r.output;
    if (hf_name == "DeepseekV3ForCausalLM") {
      EXPECT_NE(r.output.find("attention:      MLA"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("rope scaling:   yarn, factor 4"), std::string::npos) << r.output;
    }
    std::filesystem::remove(out);
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, ArchGgufCli,
                         ::testing::Values(GgufCliCase{"qwen3_moe", "Qwen3MoeForCausalLM"},
                                           GgufCliCase{"qwen2_moe", "Qwen2MoeForCausalLM"},
                                           GgufCliCase{"glm4_moe", "Glm4MoeForCausalLM"},
                                           GgufCliCase{"deepseek_v3", "DeepseekV3ForCausalLM"}),
                         [](const ::testing::TestParamInfo<GgufCliCase>& info) { return info.param.dir; });

TEST(ArchGgufCliErrors, BadGgufTargetIsAClearError) {
  const std::string out = (std::filesystem::path(::testing::TempDir()) / ("densa_cli_bad_" + std::to_string(::getpid()) + ".gguf")).string();
  const RunResult q = run("quantize " + ref_dir("glm4_moe") + " " + out + " --to int4");
  EXPECT_EQ(q.exit_code, 1) << q.output;
  EXPECT_NE(q.output.find("densa quantize: --to 'int4'"), std::string::npos) << q.output;
}

}  // namespace
}  // namespace densa
