#pragma once
// WorkerPool: the prefill and decode workers behind the router, their health and the load
// the router itself has put on them (tokens and requests in flight). pick() returns the
// healthy worker of a role with the fewest tokens in flight; ties go round-robin. Thread-safe.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace densa::router {

enum class WorkerRole { kPrefill, kDecode };
const char* worker_role_name(WorkerRole role);

using WorkerId = StrongId<struct WorkerIdTag>;

// "http://host:port" of one worker; no path, no https.
struct WorkerUrl {
  std::string origin;  // "http://127.0.0.1:8081" (what X-Densa-Prefill-Url carries)
  std::string host;
  int port = 0;
};
Result<WorkerUrl> parse_worker_url(std::string_view url);
// "URL[,URL...]": at least one; duplicates are an error.
Result<std::vector<WorkerUrl>> parse_worker_list(std::string_view comma_list);

struct WorkerSnapshot {
  WorkerId id;
  WorkerRole role = WorkerRole::kDecode;
  std::string url;
  bool healthy = false;
  int64_t tokens_in_flight = 0;
  int64_t requests_in_flight = 0;
  uint64_t failures = 0;       // request failures the router blamed on this worker
  std::string last_error;      // why it was last marked unhealthy; empty if never
};

class WorkerPool {
 public:
  using Clock = std::chrono::steady_clock;

  // Workers start unhealthy ("not probed yet") until mark_healthy().
  WorkerPool(std::vector<WorkerUrl> prefill, std::vector<WorkerUrl> decode);

  size_t num_workers() const { return workers_.size(); }
  std::vector<WorkerId> ids(WorkerRole role) const;
  const WorkerUrl& url(WorkerId id) const { return workers_.at(id.value).url; }
  WorkerRole role(WorkerId id) const { return workers_.at(id.value).role; }

  // The healthy worker of `role` not in `exclude` with the fewest tokens in flight; among
  // equals the next in round-robin order after the last one picked. nullopt: none eligible.
  std::optional<WorkerId> pick(WorkerRole role, std::span<const WorkerId> exclude = {});

  void add_load(WorkerId id, int64_t tokens);
  // Precondition: matches an earlier add_load.
  void remove_load(WorkerId id, int64_t tokens);

  // A request failed on this worker: it is out of pick() for at least `hold`, and until a
  // health probe says it is back.
  void mark_failed(WorkerId id, std::string reason, std::chrono::milliseconds hold);
  // A health probe's verdict. A healthy verdict inside a failure's hold is ignored.
  void set_probe_result(WorkerId id, bool healthy, std::string reason);

  bool any_healthy(WorkerRole role) const;
  std::vector<WorkerSnapshot> snapshot() const;

 private:
  struct Worker {
    WorkerUrl url;
    WorkerRole role;
    bool healthy = false;
    Clock::time_point held_until{};
    int64_t tokens_in_flight = 0;
    int64_t requests_in_flight = 0;
    uint64_t failures = 0;
    std::string last_error = "not probed yet";
  };

  mutable std::mutex mu_;
  std::vector<Worker> workers_;  // [prefill..., decode...]; WorkerId = index
  size_t next_prefill_ = 0;      // round-robin cursors, positions within the role
  size_t next_decode_ = 0;
};

// Load put on one worker for the life of one request: add_load on construction, remove_load
// on release() or destruction (once).
class LoadLease {
 public:
  LoadLease() = default;
  LoadLease(WorkerPool& pool, WorkerId id, int64_t tokens);
  ~LoadLease() { release(); }
  LoadLease(LoadLease&& other) noexcept { *this = std::move(other); }
  LoadLease& operator=(LoadLease&& other) noexcept;
  LoadLease(const LoadLease&) = delete;
  LoadLease& operator=(const LoadLease&) = delete;

  void release();

 private:
  WorkerPool* pool_ = nullptr;
  WorkerId id_;
  int64_t tokens_ = 0;
};

}  // namespace densa::router
