#pragma once
// EngineImpl: the Engine. One engine thread owns the page pool, the prefix cache, the
// scheduler and the runner; nothing else touches them. Other threads reach it only through
// the inbox (one queue of typed commands: submissions, cancels, audits, imports, export
// releases, follower commands; one mutex, which also guards the published stats snapshot)
// and through each request's RequestStream.
//
// Engine thread turn: take the inbox and run its commands in arrival order (a cancel frees
// pages now) -> plan_step -> apply -> run -> commit -> emit events -> answer audits ->
// publish stats [-> kv_audit].
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/thread_pool.h"
#include "engine/disagg_ledger.h"
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
  void release_export(RequestId id) override;
  Result<std::pair<KvImport, std::shared_ptr<RequestStream>>> begin_import(GenerateRequest request,
                                                                           int32_t num_tokens) override;
  void finish_import(RequestId id, KvImportData data) override;
  void fail_import(RequestId id, Status error) override;
  std::future<std::vector<std::string>> run_on_followers(std::vector<uint8_t> payload) override;
  KvLayout kv_layout() const override { return layout_; }
  std::vector<float> kv_static_scales() const override { return static_scales_; }

 private:
  struct Submission {
    std::unique_ptr<Request> request;
    std::shared_ptr<RequestStream> stream;
  };

  struct ImportBegin {
    Submission submission;
    int32_t num_tokens = 0;
    std::promise<Result<KvImport>> reply;
  };
  struct ImportEnd {
    RequestId id{};
    Status error;       // non-ok: fail the import
    KvImportData data;  // ok: the bytes to adopt
  };

  struct FollowerCommand {
    std::vector<uint8_t> payload;
    std::promise<std::vector<std::string>> reply;
  };
  struct Cancel {
    RequestId id{};
  };
  struct AuditRequest {
    std::promise<Status> verdict;  // answered after the turn's step
  };
  struct ExportRelease {
    RequestId id{};
  };
  // One command for the engine thread; the inbox keeps them in arrival order and the thread
  // takes them in that order at the start of its turn.
  using Command =
      std::variant<Submission, Cancel, AuditRequest, ImportBegin, ImportEnd, ExportRelease, FollowerCommand>;
  // Runs one command on the engine thread; audits are collected for after the step.
  void handle(Command& c, bool stopping, std::vector<std::promise<Status>>& audits);
  void cancel_now(RequestId id);
  // The "engine is shut down" answer of a command that arrived too late for a turn.
  void refuse(Command& c);

  void loop();
  size_t followers() const;  // world ranks other than this one
  Result<RequestParams> validate(const GenerateRequest& request, int64_t num_prompt) const;
  void begin_import_now(ImportBegin& b);
  void end_import_now(ImportEnd& e);
  void end_request(RequestId id, std::shared_ptr<RequestStream>& stream, int32_t num_prompt, FinishReason finish,
                   Status error);
  void step();
  void emit(const RequestUpdate& update);
  void inject_fault(const StepPlan& plan, std::span<Request* const> requests);
  void inject_request_faults(const StepPlan& plan, std::span<Request* const> requests);
  StepRecord step_record(const StepPlan& plan, std::span<Request* const> requests, const StepResult& result) const;
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
  int64_t num_nonfinite_logit_rows_ = 0;
  RequestFaultInjector request_faults_;     // GenerateRequest::inject_fault (tests, soak)
  TimelineRecorder timelines_;             // per-request stage times (engine thread)
  std::unique_ptr<RoutingStats> routing_;  // MoE routing load; null unless EngineConfig::routing_stats
  DisaggLedger ledger_;  // exports pinned for their senders, imports awaiting their KV
  const KvLayout layout_;
  const std::vector<float> static_scales_;             // fp8 static KV only

  // Inbox (one queue of typed commands) and published stats, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Command> inbox_;
  int32_t queued_submissions_ = 0;  // Submissions in inbox_ (counted as waiting by stats())
  bool stop_ = false;
  EngineStats published_;

  std::atomic<uint64_t> next_id_{1};  // the next RequestId
  std::thread thread_;
};

}  // namespace densa
