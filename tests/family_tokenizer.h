#pragma once
// Tokenizer directories for the Kimi K2 and GLM-4.5+ tool-call formats, written by
// tests/family_tokenizer.py (which says how they are built: Qwen3's real tokenizer.json plus
// the family's special tokens and its real chat template, since neither family's own
// tokenizer is obtainable here). bench/tool_accuracy.sh uses the same script.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace densa::testing {

inline std::filesystem::path shared_templates_dir() { return models_dir().parent_path() / "templates"; }

// family: "kimi_k2" or "glm45". Written once per process under the temp directory; empty
// path when the script fails (the caller's load then names the directory).
inline std::filesystem::path family_tokenizer_dir(const std::string& family) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("densa-tok-" + family + "-" + std::to_string(::getpid()));
  if (std::filesystem::exists(out / "generation_config.json")) return out;
  const std::string cmd = "python3 '" + std::string(DENSA_SOURCE_DIR) + "/tests/family_tokenizer.py' " + family + " '" +
                          real_tokenizer_dir("qwen3").string() + "' '" + shared_templates_dir().string() + "' '" +
                          out.string() + "'";
  if (std::system(cmd.c_str()) != 0) return {};
  return out;
}

}  // namespace densa::testing
