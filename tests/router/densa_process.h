#pragma once
// DensaProcess: a real `densa router` / `densa serve` (DENSA_BINARY) as a child process on a
// free port, with its log in a temp file; wait_ready() polls GET /health, stop() sends SIGTERM
// and returns the exit code, kill9() kills it. Built on the process and curl helpers of
// tests/e2e/server_process.h (spawn_densa, stop_child, curl_request, free_port).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "e2e/server_process.h"

namespace densa::testing {

// One densa subcommand as a child process on a free port, log in a temp file.
class DensaProcess {
 public:
  // `args` without --port; `name` names the log file.
  // The port is the one it bound with --port 0 (ListenedPort, e2e/server_process.h).
  DensaProcess(const std::string& name, std::vector<std::string> args) {
    log_path_ = child_log_path(name);
    args.push_back("--port");
    args.push_back("0");
    pid_ = spawn_densa(args, log_path_);
  }
  ~DensaProcess() { stop(); }
  DensaProcess(const DensaProcess&) = delete;
  DensaProcess& operator=(const DensaProcess&) = delete;

  // Waits until GET /health answers `status`; false (with the log) on exit or timeout.
  bool wait_ready(int status = 200, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int st = 0;
      if (pid_ > 0 && waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "densa exited early:\n" << log();
        return false;
      }
      if (port() > 0 && get("/health").status == status) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "densa did not answer /health " << status << ":\n" << log();
    return false;
  }
  // SIGTERM: the exit code (0 = graceful).
  int stop() { return stop_child(pid_); }
  // SIGKILL: no goodbye to anyone.
  void kill9() { stop_child(pid_, SIGKILL); }
  bool running() const { return pid_ > 0; }

  std::string url(const std::string& path = "") const { return "http://127.0.0.1:" + std::to_string(port()) + path; }
  int port() const { return port_.get(pid_, log_path_); }
  std::string log() const { return run_command("cat " + shell_quote(log_path_)); }

  CurlResponse curl(const std::string& method, const std::string& path, const std::string& body = "",
                    const std::string& extra = "") const {
    return curl_request(method, url(path), body, "--max-time 120 " + extra);
  }
  CurlResponse get(const std::string& path) const { return curl("GET", path); }
  CurlResponse post(const std::string& path, const std::string& body) const { return curl("POST", path, body); }

 private:
  ListenedPort port_;
  pid_t pid_ = -1;
  std::string log_path_;
};

inline std::string join_urls(const std::vector<std::string>& urls) {
  std::string s;
  for (const std::string& u : urls) s += (s.empty() ? "" : ",") + u;
  return s;
}

// `densa router --prefill P --decode D [extra]`.
inline std::unique_ptr<DensaProcess> start_router(const std::vector<std::string>& prefill,
                                                  const std::vector<std::string>& decode,
                                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"router", "--prefill", join_urls(prefill), "--decode", join_urls(decode)};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<DensaProcess>("router", args);
}

// `densa serve` on the MoE fixture with 2 threads [extra].
inline std::unique_ptr<DensaProcess> start_serve(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"serve", "-m", fixture_model_path(), "--threads", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<DensaProcess>("serve", args);
}

}  // namespace densa::testing
