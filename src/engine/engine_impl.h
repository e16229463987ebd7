#pragma once
// EngineImpl: the Engine. One engine thread owns the page pool, the prefix cache, the
// scheduler and the runner; nothing else touches them. Other threads reach it only through
// the inbox (submissions, cancels, audit requests; one mutex, which also guards the published
// stats snapshot) and through each request's RequestStream.
//
// Engine thread turn: take the inbox -> abort cancelled requests (pages freed now) ->
// plan_step -> apply -> run -> commit -> emit events -> publish stats [-> kv_audit].
#include <atomic>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/timeline_recorder.h"
#include "exec/runner.h"
#include "exec/tag_tracker.h"
#include "kv/page_pool.h"
#include "kv/radix_cache.h"
#include "sched/scheduler.h"

namespace densa {

class EngineImpl final : public Engine {
 public:
  EngineImpl(const ModelWeights& weights, const EngineConfig& config, PagePool pool);
  ~EngineImpl() override;

  Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request) override;
  void cancel(RequestId id) override;
  EngineStats stats() const override;
  Status audit() override;
  void shutdown() override;
  Status set_kv_integrity(const KvIntegrityPolicy& policy) override;
  std::optional<KvIntegrityPolicy> kv_integrity() const override;
  std::optional<RoutingSnapshot> routing_stats() const override;

 private:
  struct Submission {
    std::unique_ptr<Request> request;
    std::shared_ptr<RequestStream> stream;
  };

  void loop();
  void step();
  void emit(const RequestUpdate& update);
  void inject_fault(const StepPlan& plan, std::span<Request* const> requests);
  Status audit_now() const;
  EngineStats snapshot() const;  // engine thread

  const ModelWeights& weights_;
  const EngineConfig config_;
  const bool audit_every_step_;

  // Engine-thread state.
  ThreadPool threads_;
  PagePool pool_;
  RadixCache cache_;
  Scheduler scheduler_;
  NoopTracker noop_tracker_;
  std::unique_ptr<TagTracker> own_tracker_;  // when EngineConfig::kv_integrity is set
  Runner runner_;
  std::unordered_map<RequestId, std::shared_ptr<RequestStream>> streams_;
  int64_t num_steps_ = 0;
  int64_t num_integrity_violations_ = 0;
  TimelineRecorder timelines_;             // per-request stage times (engine thread)
  std::unique_ptr<RoutingStats> routing_;  // MoE routing load; null unless EngineConfig::routing_stats

  // Inbox and published stats, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Submission> inbox_;
  std::vector<RequestId> cancels_;
  std::vector<std::promise<Status>> audits_;
  bool stop_ = false;
  EngineStats published_;

  std::atomic<RequestId> next_id_{1};
  std::thread thread_;
};

}  // namespace densa
