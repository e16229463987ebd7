#pragma once
// Runs one of scripts/check-*.py on a tree for the structure tests: its exit code and output.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace densa {

struct ScriptRun {
  int exit_code = -1;
  std::string output;
};

// `script` is a file name under scripts/ (e.g. "check-layers.py"); stderr goes to the output.
inline ScriptRun run_check_script(const std::string& script, const std::filesystem::path& root) {
  const std::string cmd =
      "/usr/bin/python3 " DENSA_SOURCE_DIR "/scripts/" + script + " '" + root.string() + "' 2>&1";
  ScriptRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace densa
