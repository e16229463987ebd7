// The real `densa --version`: the version line names a commit git knows (or "unknown" in a
// tree without git metadata), and the kernel lines say what this process's dispatch does:
// the ISA level the kernels report here, capped by DENSA_ISA, and AMX off under DENSA_AMX=0.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "cli/cli_run.h"
#include "core/cpu_features.h"
#include "kernels/matmul.h"

namespace densa {
namespace {

TEST(VersionCli, NamesVersionAndACommitGitKnows) {
  const RunResult r = run("--version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(^densa [0-9]+\.[0-9]+\.[0-9]+ \(commit ([^)]+)\)\n)")))
      << r.output;
  const std::string commit = m[1];
  if (!std::filesystem::exists(std::filesystem::path(DENSA_SOURCE_DIR) / ".git")) {
    EXPECT_EQ(commit, "unknown");
    return;
  }
  // `git describe --always --dirty`: a tag-based name ends in -g<hash>; a bare hash is the name.
  std::smatch h;
  ASSERT_TRUE(std::regex_search(commit, h, std::regex(R"((?:^|-g)([0-9a-f]{7,40})(?:-dirty)?$)"))) << commit;
  const std::string check = "git -C " + std::string(DENSA_SOURCE_DIR) + " cat-file -e " + h[1].str() + "^{commit} 2>/dev/null";
  EXPECT_EQ(std::system(check.c_str()), 0) << "git does not know commit " << h[1];
}

TEST(VersionCli, KernelLinesFollowTheDispatch) {
  const RunResult r = run("--version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("isa: " + std::string(cpu_isa_name(cpu_isa())) + " (hardware: " +
                          std::string(cpu_isa_name(cpu_isa_hardware()))),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(matmul_bf16_on_amx() ? "bf16 / f16 weights: AMX tiles" : "bf16 / f16 weights: fp32 activations"),
            std::string::npos)
      << r.output;

  const RunResult scalar = run("--version", "DENSA_ISA=scalar");
  ASSERT_EQ(scalar.exit_code, 0) << scalar.output;
  EXPECT_NE(scalar.output.find("isa: scalar (hardware: " + std::string(cpu_isa_name(cpu_isa_hardware()))),
            std::string::npos)
      << scalar.output;
  EXPECT_NE(scalar.output.find("int4 / q4_0 weights: exact fallback"), std::string::npos) << scalar.output;
  EXPECT_NE(scalar.output.find("paged attention: scalar"), std::string::npos) << scalar.output;

  if (static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx2)) {
    const RunResult avx2 = run("--version", "DENSA_ISA=avx2");
    ASSERT_EQ(avx2.exit_code, 0) << avx2.output;
    EXPECT_NE(avx2.output.find("int4 / q4_0 weights: 16-row tiles, exact group sums, x as int8; AVX2"), std::string::npos)
        << avx2.output;
    EXPECT_NE(avx2.output.find("int8 / q8_0 weights: 16-row tiles, exact group sums, x as int8; AVX2"), std::string::npos)
        << avx2.output;
    EXPECT_NE(avx2.output.find("gguf k-quant / iq4 / mxfp4 weights: affine rows in 16-row tiles, exact group sums, "
                               "x as int8; AVX2"),
              std::string::npos)
        << avx2.output;
  }

  const RunResult no_amx = run("--version", "DENSA_AMX=0");
  ASSERT_EQ(no_amx.exit_code, 0) << no_amx.output;
  EXPECT_EQ(no_amx.output.find("(in use)"), std::string::npos) << no_amx.output;
  EXPECT_EQ(no_amx.output.find("AMX tiles"), std::string::npos) << no_amx.output;
}

}  // namespace
}  // namespace densa
