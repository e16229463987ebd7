#include "router/worker_pool.h"

#include <gtest/gtest.h>

#include <memory>

namespace densa::router {
namespace {

std::vector<WorkerUrl> urls(std::initializer_list<const char*> list) {
  std::vector<WorkerUrl> out;
  for (const char* u : list) out.push_back(parse_worker_url(u).value());
  return out;
}

std::unique_ptr<WorkerPool> healthy_pool(size_t num_prefill, size_t num_decode) {
  std::vector<WorkerUrl> p, d;
  for (size_t i = 0; i < num_prefill; ++i) p.push_back(parse_worker_url("http://p:" + std::to_string(9000 + i)).value());
  for (size_t i = 0; i < num_decode; ++i) d.push_back(parse_worker_url("http://d:" + std::to_string(9100 + i)).value());
  auto pool = std::make_unique<WorkerPool>(p, d);
  for (size_t i = 0; i < pool->num_workers(); ++i) pool->set_probe_result(WorkerId(static_cast<int32_t>(i)), true, "");
  return pool;
}

TEST(RouterWorkerUrl, ParsesHostAndPortAndRejectsTheRest) {
  Result<WorkerUrl> w = parse_worker_url("http://10.0.0.2:8081/");
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_EQ(w->origin, "http://10.0.0.2:8081");
  EXPECT_EQ(w->host, "10.0.0.2");
  EXPECT_EQ(w->port, 8081);
  for (const char* bad : {"10.0.0.2:8081", "https://h:1", "http://h", "http://h:0", "http://h:70000", "http://h:80x",
                          "http://h:80/v1", "http://:80", ""})
    EXPECT_FALSE(parse_worker_url(bad).is_ok()) << bad;
}

TEST(RouterWorkerUrl, ListSplitsOnCommasAndRejectsDuplicatesAndEmpty) {
  Result<std::vector<WorkerUrl>> l = parse_worker_list("http://a:1,http://b:2");
  ASSERT_TRUE(l.is_ok());
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[1].origin, "http://b:2");
  EXPECT_FALSE(parse_worker_list("http://a:1,http://a:1/").is_ok());
  EXPECT_FALSE(parse_worker_list("").is_ok());
  EXPECT_FALSE(parse_worker_list(",").is_ok());
}

TEST(RouterWorkerPool, StartsUnhealthyUntilProbed) {
  WorkerPool pool(urls({"http://p:1"}), urls({"http://d:1"}));
  EXPECT_FALSE(pool.any_healthy(WorkerRole::kPrefill));
  EXPECT_FALSE(pool.pick(WorkerRole::kDecode).has_value());
  pool.set_probe_result(pool.ids(WorkerRole::kDecode)[0], true, "");
  EXPECT_TRUE(pool.any_healthy(WorkerRole::kDecode));
  EXPECT_EQ(pool.pick(WorkerRole::kDecode), pool.ids(WorkerRole::kDecode)[0]);
}

TEST(RouterWorkerPool, TiesGoRoundRobin) {
  std::unique_ptr<WorkerPool> owned = healthy_pool(1, 3);
  WorkerPool& pool = *owned;
  const std::vector<WorkerId> d = pool.ids(WorkerRole::kDecode);
  std::vector<WorkerId> picked;
  for (int i = 0; i < 6; ++i) picked.push_back(*pool.pick(WorkerRole::kDecode));
  EXPECT_EQ(picked, (std::vector<WorkerId>{d[0], d[1], d[2], d[0], d[1], d[2]}));
  // The prefill cursor is separate from the decode cursor.
  EXPECT_EQ(pool.pick(WorkerRole::kPrefill), pool.ids(WorkerRole::kPrefill)[0]);
}

TEST(RouterWorkerPool, PicksTheFewestTokensInFlight) {
  std::unique_ptr<WorkerPool> owned = healthy_pool(1, 3);
  WorkerPool& pool = *owned;
  const std::vector<WorkerId> d = pool.ids(WorkerRole::kDecode);
  pool.add_load(d[0], 100);
  pool.add_load(d[1], 10);
  pool.add_load(d[2], 50);
  EXPECT_EQ(pool.pick(WorkerRole::kDecode), d[1]);
  EXPECT_EQ(pool.pick(WorkerRole::kDecode), d[1]);  // still the least loaded
  pool.remove_load(d[0], 100);
  EXPECT_EQ(pool.pick(WorkerRole::kDecode), d[0]);
  const std::vector<WorkerSnapshot> s = pool.snapshot();
  EXPECT_EQ(s[d[1].value].tokens_in_flight, 10);
  EXPECT_EQ(s[d[1].value].requests_in_flight, 1);
  EXPECT_EQ(s[d[0].value].requests_in_flight, 0);
}

TEST(RouterWorkerPool, ExcludedAndUnhealthyWorkersAreSkipped) {
  std::unique_ptr<WorkerPool> owned = healthy_pool(1, 3);
  WorkerPool& pool = *owned;
  const std::vector<WorkerId> d = pool.ids(WorkerRole::kDecode);
  const std::vector<WorkerId> exclude = {d[0], d[2]};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pool.pick(WorkerRole::kDecode, exclude), d[1]);
  pool.set_probe_result(d[1], false, "HTTP 500");
  EXPECT_FALSE(pool.pick(WorkerRole::kDecode, exclude).has_value());
  EXPECT_EQ(pool.snapshot()[d[1].value].last_error, "HTTP 500");
}

TEST(RouterWorkerPool, AFailedWorkerIgnoresHealthyProbesDuringItsHold) {
  std::unique_ptr<WorkerPool> owned = healthy_pool(1, 2);
  WorkerPool& pool = *owned;
  const std::vector<WorkerId> d = pool.ids(WorkerRole::kDecode);
  pool.mark_failed(d[0], "connection refused", std::chrono::hours(1));
  pool.set_probe_result(d[0], true, "");
  WorkerSnapshot s = pool.snapshot()[d[0].value];
  EXPECT_FALSE(s.healthy);
  EXPECT_EQ(s.failures, 1u);
  EXPECT_EQ(s.last_error, "connection refused");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pool.pick(WorkerRole::kDecode), d[1]);
  // Without a hold the next healthy probe brings it back.
  pool.mark_failed(d[1], "reset", std::chrono::milliseconds(0));
  EXPECT_FALSE(pool.any_healthy(WorkerRole::kDecode));
  pool.set_probe_result(d[1], true, "");
  EXPECT_EQ(pool.pick(WorkerRole::kDecode), d[1]);
}

TEST(RouterLoadLease, ReleasesOnceOnDestructionOrRelease) {
  std::unique_ptr<WorkerPool> owned = healthy_pool(1, 1);
  WorkerPool& pool = *owned;
  const WorkerId d = pool.ids(WorkerRole::kDecode)[0];
  {
    LoadLease a(pool, d, 30);
    LoadLease b(pool, d, 12);
    EXPECT_EQ(pool.snapshot()[d.value].tokens_in_flight, 42);
    b.release();
    b.release();
    EXPECT_EQ(pool.snapshot()[d.value].tokens_in_flight, 30);
    LoadLease moved = std::move(a);
    EXPECT_EQ(pool.snapshot()[d.value].requests_in_flight, 1);
  }
  EXPECT_EQ(pool.snapshot()[d.value].tokens_in_flight, 0);
  EXPECT_EQ(pool.snapshot()[d.value].requests_in_flight, 0);
}

}  // namespace
}  // namespace densa::router
