#pragma once
// Runs tests/text/tokenizer_oracle.cjs (node, the pinned npm oracles) over strings.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/ids.h"

namespace densa {

inline const std::string kOracles = DENSA_ORACLES_DIR;
inline const std::string kOracleScript = std::string(DENSA_SOURCE_DIR) + "/tests/text/tokenizer_oracle.cjs";

inline std::filesystem::path oracle_tmp(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("densa_tok_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

// Ids per input string from the oracle invoked with `args` (after the oracles dir).
inline std::vector<std::vector<TokenId>> oracle_encode(const std::string& args, const std::vector<std::string>& inputs) {
  const auto in = oracle_tmp("in.jsonl"), out = oracle_tmp("out.jsonl");
  {
    std::ofstream f(in, std::ios::binary);
    for (const std::string& s : inputs) f << nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  const std::string cmd = "node " + kOracleScript + " " + kOracles + " " + args + " < " + in.string() + " > " + out.string();
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  std::vector<std::vector<TokenId>> result;
  std::ifstream f(out);
  for (std::string line; std::getline(f, line);) result.push_back(nlohmann::json::parse(line).get<std::vector<TokenId>>());
  EXPECT_EQ(result.size(), inputs.size()) << cmd;
  return result;
}

inline std::vector<std::string> read_lines_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line).get<std::string>());
  return out;
}

inline std::vector<std::string> read_lines_text(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

}  // namespace densa
