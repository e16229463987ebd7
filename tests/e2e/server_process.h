#pragma once
// ServerProcess: runs the real `densa serve` binary (DENSA_BINARY) on a free port for
// end-to-end tests, waits until /health answers, and stops it with SIGTERM (checking that it
// exits cleanly). Plus curl helpers: every request in these tests goes through real curl.
//
// Servers start with --port 0 and the test reads the port the server bound from its
// "listening on http://HOST:PORT" line (ListenedPort). A port picked by the test and bound
// later by the server could be taken in between by a server of a test running in parallel,
// whose /health then answered for ours (seen once under ctest -j2).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace densa::testing {

inline std::string fixture_model_path() {
  return (std::filesystem::path(DENSA_MODELS_DIR) / "tinystories-mixtral-3.6m" / "gguf" /
          "tinystories-mixtral-3.6m-f16.gguf").string();
}

// Runs `cmd` in a shell; returns its stdout (stderr goes to the test log).
inline std::string run_command(const std::string& cmd, int* exit_code = nullptr) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  if (exit_code) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// Single-quotes `s` for the shell.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// A log file name of its own for each child of this test process.
// Unique per call: the pid alone is not (pid_max is often 32,768, and one ctest run starts
// thousands of processes, curl included), and a log left by an earlier process of the same pid
// once held another server's "listening on" line, which ListenedPort read before the child
// truncated the file: the test then polled a dead port for 60 s. The start time in ns and the
// parent-side truncation in spawn_densa rule both out.
inline std::string child_log_path(const std::string& name) {
  static std::atomic<int> counter{0};
  const auto ns = std::chrono::steady_clock::now().time_since_epoch().count();
  return (std::filesystem::temp_directory_path() / ("densa-" + name + "-" + std::to_string(::getpid()) + "-" +
                                                    std::to_string(ns) + "-" + std::to_string(counter++) + ".log"))
      .string();
}

// The port a child started with --port 0 bound: read from its log's "listening on
// http://HOST:PORT" line, waiting (up to `timeout`) while the child runs and has not printed
// it. 0 if it exited first or the line never came; once found it is kept.
class ListenedPort {
 public:
  int get(pid_t pid, const std::string& log_path, std::chrono::seconds timeout = std::chrono::seconds(120)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (port_ == 0) {
      std::ifstream in(log_path);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      constexpr std::string_view kKey = "listening on http://";
      const size_t at = text.find(kKey);
      const size_t colon = at == std::string::npos ? at : text.find(':', at + kKey.size());
      if (colon != std::string::npos && text.find('\n', colon) != std::string::npos) {
        port_ = std::atoi(text.c_str() + colon + 1);
        break;
      }
      if (pid <= 0 || exited(pid) || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return port_;
  }

 private:
  // Whether the child has exited (a zombie counts), without reaping it.
  static bool exited(pid_t pid) {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == pid;
  }
  mutable int port_ = 0;
};

// What curl got: HTTP status, headers and body.
struct CurlResponse {
  int status = 0;
  std::string headers;
  std::string body;
};

// curl `method url` with `body` as JSON (if any) and `extra` appended to the command line;
// the status, headers and body it got (status 0 if curl produced nothing).
inline CurlResponse curl_request(const std::string& method, const std::string& url, const std::string& body = "",
                                 const std::string& extra = "") {
  const std::string marker = "\n__DENSA_STATUS__:";
  std::string cmd = "curl -sS -N -D - -X " + method + " " + shell_quote(url) + " " + extra;
  if (!body.empty()) cmd += " -H 'Content-Type: application/json' --data-binary " + shell_quote(body);
  cmd += " -w " + shell_quote(marker + "%{http_code}") + " 2>/dev/null";
  const std::string out = run_command(cmd);
  CurlResponse r;
  const size_t m = out.rfind(marker);
  if (m == std::string::npos) return r;
  r.status = std::atoi(out.c_str() + m + marker.size());
  const std::string all = out.substr(0, m);
  const size_t split = all.find("\r\n\r\n");
  r.headers = all.substr(0, split);
  r.body = split == std::string::npos ? "" : all.substr(split + 4);
  return r;
}

// Where an mpirun started for the child logging to `log_path` keeps its session directory.
inline std::string mpi_session_base(const std::string& log_path) { return log_path + ".ompi"; }

// A child process running DENSA_BINARY with `args`, stdout+stderr to `log_path`; with a
// `launcher` (mpirun and its flags, looked up on PATH) the child is the launcher running it.
// An mpirun gets a session directory base of its own (mpi_session_base): Open MPI's default,
// /tmp/ompi.<host>.<uid>, is shared by every job of the user, and under ctest -j2 one mpirun
// removing it as it ended while another created it failed the second's start ("mkdir ...
// File exists", orte_session_dir failed).
inline pid_t spawn_densa(const std::vector<std::string>& args, const std::string& log_path,
                         const std::vector<std::string>& launcher = {}) {
  std::vector<std::string> argv_s = launcher;
  if (!launcher.empty() && launcher[0] == "mpirun") {
    const std::string base = mpi_session_base(log_path);
    std::filesystem::create_directories(base);
    argv_s.insert(argv_s.begin() + 1, {"--mca", "orte_tmpdir_base", base});
  }
  argv_s.push_back(DENSA_BINARY);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  // Empty before the child exists: the parent reads the log for the port as soon as fork returns.
  std::ofstream(log_path, std::ios::trunc).flush();
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* log = std::fopen(log_path.c_str(), "a");
    if (log) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// SIGTERM (or `sig`), then wait up to 10 s (SIGKILL after); exit code, -1 if killed or not running.
inline int stop_child(pid_t& pid, int sig = SIGTERM) {
  if (pid <= 0) return -1;
  kill(pid, sig);
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  pid = -1;
  return -1;
}

class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> extra_args, const std::string& model = fixture_model_path(),
                         const std::vector<std::string>& launcher = {}) {
    log_path_ = child_log_path("serve");
    std::vector<std::string> args = {"serve", "-m", model, "--port", "0", "--threads", launcher.empty() ? "2" : "1"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = spawn_densa(args, log_path_, launcher);
  }
  ~ServerProcess() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(mpi_session_base(log_path_), ec);
  }

  // Waits for GET /health == 200. False (with the server log) on timeout or early exit.
  bool wait_ready(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "densa serve exited early:\n" << log();
        return false;
      }
      if (port() > 0 && get("/health").status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "densa serve did not become ready:\n" << log();
    return false;
  }

  // SIGTERM, then wait; returns the exit code (0 = graceful), -1 if killed or not running.
  int stop() { return stop_child(pid_); }

  // SIGKILL, no goodbye (a worker dying mid-request); waits for the process to be gone.
  void kill_hard() { stop_child(pid_, SIGKILL); }

  // The pid of this group's rank `rank` (a launcher's child whose environment says
  // OMPI_COMM_WORLD_RANK=rank), searched among this process's own descendants only: under
  // ctest -j2 another test's group runs the same command line, and a pid found by command
  // line alone was once that group's rank (its kill failed both tests). -1 if none.
  pid_t rank_pid(int rank) const {
    namespace fs = std::filesystem;
    if (pid_ <= 0) return -1;
    auto parent_of = [](pid_t p) -> pid_t {
      std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
      std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      const size_t close = all.rfind(')');  // the command name may hold spaces and parentheses
      if (close == std::string::npos) return -1;
      char state = 0;
      int ppid = -1;
      return std::sscanf(all.c_str() + close + 1, " %c %d", &state, &ppid) == 2 ? ppid : -1;
    };
    const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t p = static_cast<pid_t>(std::stol(name));
      bool ours = false;
      for (pid_t a = parent_of(p), hops = 0; a > 1 && hops < 64; a = parent_of(a), ++hops) {
        if (a == pid_) {
          ours = true;
          break;
        }
      }
      if (!ours) continue;
      std::ifstream env_file(entry.path() / "environ");
      std::string var;
      bool is_rank = false;
      while (std::getline(env_file, var, '\0')) is_rank |= var == want;
      std::ifstream cmd_file(entry.path() / "cmdline");
      std::string argv0;
      std::getline(cmd_file, argv0, '\0');
      if (is_rank && argv0 == DENSA_BINARY) return p;
    }
    return -1;
  }

  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port()) + path; }
  // The bound port (waits for the server to print it; 0 if it exited first).
  int port() const { return port_.get(pid_, log_path_); }
  std::string log() const { return run_command("cat " + shell_quote(log_path_)); }

  // curl; `extra` is appended to the command line (e.g. -H, --max-time).
  CurlResponse curl(const std::string& method, const std::string& path, const std::string& body = "",
                    const std::string& extra = "") const {
    return curl_request(method, url(path), body, extra);
  }
  CurlResponse get(const std::string& path, const std::string& extra = "") const { return curl("GET", path, "", extra); }
  CurlResponse post(const std::string& path, const std::string& body, const std::string& extra = "") const {
    return curl("POST", path, body, extra);
  }

 private:
  ListenedPort port_;
  pid_t pid_ = -1;
  std::string log_path_;
};

// The "data:" payloads of an SSE body, in order.
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

}  // namespace densa::testing
