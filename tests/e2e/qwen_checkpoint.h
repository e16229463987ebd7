#pragma once
// A random-weight checkpoint with Qwen3's real tokenizer and chat template (densa gen-model
// --tokenizer, from the test oracles), built once per test process.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "e2e/server_process.h"
#include "test_util.h"

namespace densa::testing {

inline std::filesystem::path qwen_checkpoint() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path out = std::filesystem::temp_directory_path() / ("densa-e2e-qwen3-" + std::to_string(::getpid()));
    std::filesystem::remove_all(out);
    int rc = 0;
    const std::string log = run_command(std::string(DENSA_BINARY) +
                                        " gen-model --arch llama --hidden 64 --layers 1 --heads 4 --kv-heads 2 --ffn 128 "
                                        "--max-context 4096 --format hf --dtype bf16 --tokenizer " +
                                        shell_quote(real_tokenizer_dir("qwen3").string()) + " " +
                                        shell_quote(out.string()) + " 2>&1",
                                        &rc);
    EXPECT_EQ(rc, 0) << log;
    return out;
  }();
  return dir;
}

}  // namespace densa::testing
