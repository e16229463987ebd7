// Disaggregation across two network namespaces joined by a veth pair: the prefill worker in
// one, the decode worker and the router in the other, so the KV crosses a real (virtual)
// link over UCX tcp instead of loopback. Needs root (`ip netns`); without it the test says so
// and is skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "router/densa_process.h"

namespace densa::testing {
namespace {

using nlohmann::json;

// Two namespaces + a veth pair (10.77.x.1 <-> 10.77.x.2), removed on destruction.
class NetnsPair {
 public:
  NetnsPair() : tag_(std::to_string(getpid() % 100000)) {
    const std::string a = name('a'), b = name('b'), va = "dva" + tag_, vb = "dvb" + tag_;
    subnet_ = "10.77." + std::to_string(getpid() % 250) + ".";
    const std::string script =
        "ip netns add " + a + " && ip netns add " + b + " && ip link add " + va + " type veth peer name " + vb +
        " && ip link set " + va + " netns " + a + " && ip link set " + vb + " netns " + b + " && ip -n " + a +
        " addr add " + subnet_ + "1/24 dev " + va + " && ip -n " + b + " addr add " + subnet_ + "2/24 dev " + vb +
        " && ip -n " + a + " link set " + va + " up && ip -n " + b + " link set " + vb + " up && ip -n " + a +
        " link set lo up && ip -n " + b + " link set lo up";
    int code = -1;
    run_command("(" + script + ") 2>&1", &code);
    ok_ = code == 0;
  }
  ~NetnsPair() { run_command("ip netns del " + name('a') + " 2>/dev/null; ip netns del " + name('b') + " 2>/dev/null"); }
  bool ok() const { return ok_; }
  std::string name(char side) const { return std::string("densa_") + side + tag_; }
  std::string ip(char side) const { return subnet_ + (side == 'a' ? "1" : "2"); }

 private:
  std::string tag_, subnet_;
  bool ok_ = false;
};

// `densa ARGS` inside namespace `ns` (through `ip netns exec`), stopped with SIGTERM.
class NetnsProcess {
 public:
  NetnsProcess(const std::string& ns, std::vector<std::string> args, const std::string& log_name) {
    log_ = (std::filesystem::temp_directory_path() / log_name).string();
    std::string cmd = "exec ip netns exec " + ns + " " + DENSA_BINARY;
    for (const std::string& a : args) cmd += " " + shell_quote(a);
    pid_ = spawn_shell(cmd + " >" + shell_quote(log_) + " 2>&1");
  }
  ~NetnsProcess() { stop_child(pid_); }
  std::string log() const { return run_command("cat " + shell_quote(log_)); }

 private:
  static pid_t spawn_shell(const std::string& cmd) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }
  pid_t pid_ = -1;
  std::string log_;
};

// curl run inside namespace `ns`: the body, or "" on failure.
std::string ns_curl(const std::string& ns, const std::string& url, const std::string& body = "") {
  std::string cmd = "ip netns exec " + ns + " curl -sS --max-time 30 " + shell_quote(url);
  if (!body.empty()) cmd += " -H 'Content-Type: application/json' --data-binary " + shell_quote(body);
  return run_command(cmd + " 2>/dev/null");
}

bool ns_wait_health(const std::string& ns, const std::string& url) {
  for (int i = 0; i < 600; ++i) {
    const json h = json::parse(ns_curl(ns, url + "/health"), nullptr, false);
    if (!h.is_discarded() && h.value("status", "") == "ok") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(RouterNetns, PrefillAndDecodeInTwoNamespacesAnswerLikeColocated) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for ip netns";
  NetnsPair net;
  ASSERT_TRUE(net.ok()) << "ip netns / veth setup failed";
  setenv("UCX_TLS", "tcp", 1);
  const std::string model = fixture_model_path();
  const int port = 18000 + getpid() % 1000;  // namespaces are private: no clash with the host
  const std::string prefill_url = "http://" + net.ip('a') + ":" + std::to_string(port);
  const std::string decode_url = "http://" + net.ip('b') + ":" + std::to_string(port);
  const std::string router_url = "http://" + net.ip('b') + ":" + std::to_string(port + 1);
  NetnsProcess prefill(net.name('a'),
                       {"serve", "-m", model, "--threads", "1", "--host", net.ip('a'), "--port", std::to_string(port),
                        "--role", "prefill"},
                       "densa-netns-prefill.log");
  NetnsProcess decode(net.name('b'),
                      {"serve", "-m", model, "--threads", "1", "--host", net.ip('b'), "--port", std::to_string(port),
                       "--role", "decode"},
                      "densa-netns-decode.log");
  unsetenv("UCX_TLS");
  ASSERT_TRUE(ns_wait_health(net.name('a'), prefill_url)) << prefill.log();
  ASSERT_TRUE(ns_wait_health(net.name('b'), decode_url)) << decode.log();
  NetnsProcess router(net.name('b'),
                      {"router", "--prefill", prefill_url, "--decode", decode_url, "--host", net.ip('b'), "--port",
                       std::to_string(port + 1)},
                      "densa-netns-router.log");
  ASSERT_TRUE(ns_wait_health(net.name('b'), router_url)) << router.log();

  std::unique_ptr<DensaProcess> colocated = start_serve();
  ASSERT_TRUE(colocated->wait_ready());
  const std::string body = json{{"prompt", "Once upon a time, there was a little girl named Lily."},
                                {"max_tokens", 24},
                                {"temperature", 0}}
                               .dump();
  const json want = json::parse(colocated->post("/v1/completions", body).body);
  const json got = json::parse(ns_curl(net.name('b'), router_url + "/v1/completions", body), nullptr, false);
  ASSERT_FALSE(got.is_discarded()) << router.log() << decode.log();
  EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]);
  const std::string metrics = ns_curl(net.name('b'), decode_url + "/metrics");
  const size_t at = metrics.find("\ndensa_kv_transfer_bytes_total ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GT(std::atof(metrics.c_str() + at + 31), 0.0) << "the KV crossed the veth link";
}

}  // namespace
}  // namespace densa::testing
