// The size limits of src/ (no file over 600 lines, no function over 120, unless the folder's
// README lists it with a reason) checked by scripts/check-sizes.py: main passes; a copy of
// src/ with one function grown past the limit fails naming it, passes again once the README
// lists it, and an exception that no longer applies fails too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "structure/script_run.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

ScriptRun check_sizes(const fs::path& root) { return run_check_script("check-sizes.py", root); }

TEST(Sizes, MainIsWithinTheLimitsOrListed) {
  const ScriptRun r = check_sizes(DENSA_SOURCE_DIR);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("every file in src/ is within 600 lines"), std::string::npos) << r.output;
}

TEST(Sizes, ALongFunctionFailsUntilListed) {
  const fs::path root = fs::temp_directory_path() / ("densa_sizes_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  fs::copy(fs::path(DENSA_SOURCE_DIR) / "src", root / "src", fs::copy_options::recursive);
  {
    const ScriptRun clean = check_sizes(root);
    ASSERT_EQ(clean.exit_code, 0) << "the copy itself: " << clean.output;
  }
  // A 130-line function (with a brace in a string and one in a comment, which must not
  // confuse the scan) added to a core file.
  {
    std::ofstream out(root / "src" / "core" / "status.cpp", std::ios::app);
    out << "namespace densa {\nint grown_function(int x) {\n  const char* s = \"}\";  // }\n";
    for (int i = 0; i < 127; ++i) out << "  x += " << i << ";\n";
    out << "  return x + (s[0] == '}');\n}\n}  // namespace densa\n";
  }
  const ScriptRun bad = check_sizes(root);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("function grown_function is 131 lines (limit 120)"), std::string::npos) << bad.output;
  // Listed with a reason in its folder's README, it passes.
  std::ofstream(root / "src" / "core" / "README.md", std::ios::app)
      << "\n## Size exceptions\n\n- `status.cpp` `grown_function`: one table, clearer whole.\n";
  const ScriptRun listed = check_sizes(root);
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  // An exception for something within the limits is stale and fails.
  std::ofstream(root / "src" / "core" / "README.md", std::ios::app) << "- `check.cpp`: no longer long.\n";
  const ScriptRun stale = check_sizes(root);
  EXPECT_EQ(stale.exit_code, 1) << stale.output;
  EXPECT_NE(stale.output.find("size exception 'check.cpp' is not over the limit"), std::string::npos) << stale.output;
  fs::remove_all(root);
}

}  // namespace
}  // namespace densa
