#pragma once
// Runs tests/text/tokenizer_oracle.cjs (node, the pinned npm oracles) over strings.
#include <gtest/gtest.h>
#include <utf8proc.h>

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

// The tokenizer test set: the generated strings (tests/data/text/tokenizer_strings.jsonl), the
// corpus lines, and multi-line paragraphs of the corpus (newlines and their merges with the
// text that follows).
inline std::vector<std::string> tokenizer_test_inputs() {
  std::vector<std::string> in = read_lines_json(std::string(DENSA_SOURCE_DIR) + "/tests/data/text/tokenizer_strings.jsonl");
  EXPECT_GE(in.size(), 2000u);
  const std::vector<std::string> corpus = read_lines_text(std::string(DENSA_DATA_DIR) + "/tinystories/valid.txt");
  EXPECT_GT(corpus.size(), 100u);
  in.insert(in.end(), corpus.begin(), corpus.end());
  for (size_t i = 0; i + 8 < corpus.size(); i += 40) {
    std::string para;
    for (size_t j = i; j < i + 8; ++j) para += corpus[j] + "\n";
    in.push_back(para);
  }
  return in;
}

// NFC by utf8proc directly, independent of the tokenizer's normalizer.
inline std::string nfc(const std::string& s) {
  utf8proc_uint8_t* out = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
  if (out == nullptr) return s;  // not valid UTF-8: no normalizer changes it
  std::string r(reinterpret_cast<const char*>(out));
  std::free(out);
  return r;
}

}  // namespace densa
