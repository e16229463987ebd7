#pragma once
// Runs tests/grammar/validate_with_ajv.cjs (npm ajv from the pinned oracles) over cases
// [{schema, outputs: [json text, ...]}, ...] and expects every one of the `expect` outputs to
// validate against its schema.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace densa {

inline void expect_all_valid_with_ajv(const nlohmann::json& cases, size_t expect, const std::string& file_stem) {
  // ctest runs each test in its own process, several at once: the file name carries the pid and
  // a per-process count, so two tests never read each other's cases.
  static std::atomic<int> serial{0};
  const std::string file = ::testing::TempDir() + "/" + file_stem + "_" + std::to_string(::getpid()) + "_" +
                           std::to_string(serial++) + ".json";
  std::ofstream(file) << cases.dump();
  const std::string cmd = "node " + std::string(DENSA_SOURCE_DIR) + "/tests/grammar/validate_with_ajv.cjs " +
                          std::string(DENSA_ORACLES_DIR) + " " + file + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int rc = pclose(pipe);
  std::filesystem::remove(file);
  ASSERT_EQ(rc, 0) << out;
  size_t ok = 0, pos = 0;
  while ((pos = out.find("ok\n", pos)) != std::string::npos) ++ok, pos += 3;
  EXPECT_NE(out.find("done " + std::to_string(expect)), std::string::npos) << out.substr(0, 2000);
  EXPECT_EQ(ok, expect) << out.substr(0, 4000);
}

}  // namespace densa
