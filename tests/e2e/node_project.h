#pragma once
// The e2e tests' Node.js project (tests/e2e/package.json: the official `openai` client,
// pinned by package-lock.json), installed with `npm ci` next to the densa binary on first use.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "e2e/server_process.h"
#include "test_util.h"

namespace densa::testing {

// Copies the client project next to the densa binary and runs `npm ci` unless the installed
// lock file is already the same. Returns the directory, or "" after recording a failure.
inline std::string prepare_node_project() {
  namespace fs = std::filesystem;
  int rc = 0;
  run_command("node --version >/dev/null 2>&1", &rc);
  if (rc != 0) {
    ADD_FAILURE() << "node is not installed (scripts/install-deps.sh installs nodejs and npm)";
    return {};
  }
  run_command("npm --version >/dev/null 2>&1", &rc);
  if (rc != 0) {
    ADD_FAILURE() << "npm is not installed (scripts/install-deps.sh installs nodejs and npm)";
    return {};
  }
  const fs::path src = fs::path(DENSA_SOURCE_DIR) / "tests" / "e2e";
  const fs::path dir = fs::path(DENSA_BINARY).parent_path() / "e2e-node";
  fs::create_directories(dir);
  for (const char* f : {"package.json", "openai_client.mjs", "openai_tools.mjs"})
    fs::copy_file(src / f, dir / f, fs::copy_options::overwrite_existing);
  const std::string lock = read_text(src / "package-lock.json");
  const bool installed = fs::exists(dir / "node_modules" / "openai" / "package.json") &&
                         read_text(dir / "package-lock.json") == lock;
  if (!installed) {
    fs::copy_file(src / "package-lock.json", dir / "package-lock.json", fs::copy_options::overwrite_existing);
    const std::string log = run_command("cd " + shell_quote(dir.string()) + " && npm ci --no-audit --no-fund 2>&1", &rc);
    if (rc != 0) {
      ADD_FAILURE() << "npm ci failed in " << dir << ":\n" << log;
      return {};
    }
  }
  return dir.string();
}

}  // namespace densa::testing
