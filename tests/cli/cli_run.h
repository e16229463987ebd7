#pragma once
// Runs the real densa binary (DENSA_BINARY) with `args` through the shell and captures its
// exit code and output (stdout + stderr), for the CLI tests.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace densa {

struct RunResult {
  int exit_code;
  std::string output;  // stdout + stderr
};

// env: assignments the binary runs with, e.g. "DENSA_ISA=scalar".
inline RunResult run(const std::string& args, const std::string& env = "") {
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(DENSA_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

}  // namespace densa
