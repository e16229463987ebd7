// `mpirun -n 2 densa serve --tp 2` (and --ep 2) behind a real HTTP client: greedy completions
// equal the single-process server's, the ranks report their weight shares, and a rank killed
// mid-request ends the group with an error for the client, not a hang.
#include <gtest/gtest.h>

#include <signal.h>

#include <nlohmann/json.hpp>

#include "server_process.h"

namespace densa {
namespace {

using testing::ServerProcess;

// As root (CI) Open MPI needs --allow-run-as-root; the shared-memory transport's single-copy
// path (CMA) needs ptrace rights a container may not grant, so it is off.
const std::vector<std::string> kMpirun = {"mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
                                          "btl_vader_single_copy_mechanism", "none", "-n", "2"};

std::string greedy_completion(const ServerProcess& s, const std::string& prompt) {
  const nlohmann::json req = {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}};
  const auto r = s.post("/v1/completions", req.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  const auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("choices")) return "";
  return j["choices"][0]["text"].get<std::string>();
}

class ServeParallel : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(ServeParallel, GreedyCompletionsMatchOneProcess) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Tom went to"};
  std::vector<std::string> want;
  {
    ServerProcess one({"--kv-dtype", "f32"});
    ASSERT_TRUE(one.wait_ready());
    for (const auto& p : prompts) want.push_back(greedy_completion(one, p));
  }
  std::vector<std::string> flags = {"--kv-dtype", "f32"};
  flags.insert(flags.end(), GetParam().begin(), GetParam().end());
  ServerProcess group(flags, testing::fixture_model_path(), kMpirun);
  ASSERT_TRUE(group.wait_ready(std::chrono::seconds(120)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(greedy_completion(group, prompts[i]), want[i]) << prompts[i];
    EXPECT_FALSE(want[i].empty());
  }
  const std::string log = group.log();
  // Each rank reports its weight bytes and RSS, and holds about half of the two ranks' sum
  // (the exact per-part bounds: tests/mpi).
  std::vector<int64_t> bytes;
  for (const char* rank : {"rank 0 of 2", "rank 1 of 2"}) {
    const size_t at = log.find(rank);
    ASSERT_NE(at, std::string::npos) << log;
    const size_t w = log.find("; weights ", at);
    ASSERT_NE(w, std::string::npos) << log;
    bytes.push_back(std::atoll(log.c_str() + w + 10));
    EXPECT_NE(log.find(" MiB", log.find("RSS ", at)), std::string::npos) << log;
  }
  for (int64_t b : bytes) {
    EXPECT_GT(b, 0) << log;
    EXPECT_LT(static_cast<double>(b), 0.6 * static_cast<double>(bytes[0] + bytes[1])) << log;
  }
  // /metrics carries every rank: the weight bytes each logged, a resident set, batches run.
  const std::string metrics = group.get("/metrics").body;
  for (int r = 0; r < 2; ++r) {
    const std::string label = "{rank=\"" + std::to_string(r) + "\"} ";
    const size_t w = metrics.find("densa_rank_weight_bytes" + label);
    ASSERT_NE(w, std::string::npos) << metrics;
    EXPECT_EQ(std::atoll(metrics.c_str() + w + std::string("densa_rank_weight_bytes").size() + label.size()), bytes[r]);
    const size_t rss = metrics.find("densa_rank_rss_bytes" + label);
    ASSERT_NE(rss, std::string::npos) << metrics;
    EXPECT_GT(std::atof(metrics.c_str() + rss + std::string("densa_rank_rss_bytes").size() + label.size()), 1e6);
    const size_t b = metrics.find("densa_rank_batches_total" + label);
    ASSERT_NE(b, std::string::npos) << metrics;
    EXPECT_GT(std::atof(metrics.c_str() + b + std::string("densa_rank_batches_total").size() + label.size()), 0);
  }
  // Not a graceful-exit check: Open MPI's mpirun, itself sent SIGTERM, ends the job and exits 1.
  group.stop();
}

INSTANTIATE_TEST_SUITE_P(Layouts, ServeParallel,
                         ::testing::Values(std::vector<std::string>{"--tp", "2"}, std::vector<std::string>{"--ep", "2"}),
                         [](const auto& info) { return info.param[0] == "--tp" ? std::string("Tp2") : std::string("Ep2"); });

// The follower rank dies (SIGKILL) while requests run: every client gets its answer or an
// error (a cut stream) instead of waiting forever, and the group exits non-zero. 32 streams
// of 200 tokens, one at a time (--max-running-requests 1); the kill comes with the first token.
TEST(ServeParallelFailure, AKilledRankEndsTheGroupAndNoClientIsLeftHanging) {
  ServerProcess group({"--tp", "2", "--comm-timeout-ms", "5000", "--max-running-requests", "1"},
                      testing::fixture_model_path(), kMpirun);
  ASSERT_TRUE(group.wait_ready(std::chrono::seconds(120)));
  const pid_t rank1 = group.rank_pid(1);
  ASSERT_GT(rank1, 0) << group.log();
  const std::string pid = std::to_string(rank1);
  const nlohmann::json req = {{"prompt", "Once upon a time"}, {"max_tokens", 200}, {"temperature", 0},
                              {"stream", true}, {"ignore_eos", true}};
  const std::string dir = testing::child_log_path("tp-kill");
  std::string script = "mkdir -p " + testing::shell_quote(dir) + "; for i in $(seq 32); do curl -sS -N --max-time 60 "
                       "-H 'Content-Type: application/json' --data-binary " + testing::shell_quote(req.dump()) + " " +
                       testing::shell_quote(group.url("/v1/completions")) + " > " + testing::shell_quote(dir) +
                       "/out.$i 2>&1 & done; until grep -qs data: " + testing::shell_quote(dir) +
                       "/out.*; do sleep 0.01; done; kill -9 " + pid + "; wait";
  const auto start = std::chrono::steady_clock::now();
  testing::run_command(script);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 55.0) << "a client waited for curl's own limit";
  const std::string done = testing::run_command("grep -l '\\[DONE\\]' " + testing::shell_quote(dir) + "/out.* | wc -l");
  EXPECT_LT(std::atoi(done.c_str()), 32) << "every stream completed: the kill landed after the work";
  EXPECT_NE(group.stop(), 0) << group.log();
}

}  // namespace
}  // namespace densa
