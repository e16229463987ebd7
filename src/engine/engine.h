#pragma once
// Engine: owns the model runner, the page pool, the prefix cache and the scheduler, and runs
// them on ONE engine thread. Other threads talk to it only through the request queue (submit,
// cancel) and each request's event stream — the only locks.
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "core/status.h"
#include "engine/engine_types.h"
#include "engine/request_stream.h"
#include "engine/step_observer.h"
#include "exec/integrity_tracker.h"
#include "exec/kv_integrity.h"
#include "exec/routing_stats.h"
#include "exec/runner.h"
#include "kv/fault_injection.h"
#include "kv/kv_scales.h"
#include "model/model_weights.h"

namespace densa {

struct EngineConfig {
  int64_t kv_cache_bytes = 64ll << 20;  // whole KV pool, reserved at start
  int page_size = 16;
  DType kv_dtype = DType::kBF16;
  int max_running_requests = 64;
  int max_waiting_requests = 1024;      // beyond this submit() fails with resource_exhausted
  int chunked_prefill_size = 256;       // max prompt tokens of one request per step
  int max_step_tokens = 1024;           // token budget of one batch (prefill chunks + decodes)
  bool enable_prefix_cache = true;
  int num_threads = 0;                  // kernel threads; 0 = all cores
  // Runs kv_audit after every step and CHECKs it (tests, debugging). Also on when the
  // environment variable DENSA_KV_AUDIT is set to a non-empty value other than "0".
  bool audit_every_step = false;
  // Verifies a batch's KV references before forward reads cached KV; null = no check.
  // Not owned; must outlive the engine.
  IntegrityTracker* integrity_tracker = nullptr;
  // When set (and integrity_tracker is null) the engine owns a TagTracker with this policy,
  // switchable at run time (set_kv_integrity) and per request; nullopt: NoopTracker, fixed.
  std::optional<KvIntegrityPolicy> kv_integrity;
  // Tests only: called after each step's page operations to break one request's KV on
  // purpose. Not owned; must outlive the engine.
  FaultInjector* fault_injector = nullptr;
  // MoE models: record the routing load of every step (Engine::routing_stats). Costs
  // O(layers x tokens x top_k) increments and a few clock reads per step; off: nothing.
  bool routing_stats = false;
  // fp8 KV only: static per-(layer, k|v, kv head) scales; nullopt = dynamic per-token scales.
  std::optional<KvScales> kv_scales;
  // Called on the engine thread after every step with its timing and batch (benchmarks).
  // Not owned; must outlive the engine. Null: no record built.
  StepObserver* step_observer = nullptr;
  // Tensor / expert parallel (comm/communicator.h, model/shard.h): this process is world rank
  // 0 of a group whose weights are sharded; every batch goes to the other ranks, which run
  // run_engine_follower() with the same config. Not owned; must outlive the engine. Null: one
  // process. Static KV scales (kv_scales) are then each rank's own: its kv heads' scales.
  const ParallelComms* parallel = nullptr;
  // A follower rank's handler of the leader's commands (Engine::run_on_followers), from the
  // layer above: prefill/decode disaggregation moves each rank's own KV shard. Unset: a
  // command gets "no command handler" from this rank.
  Runner::CommandHandler follower_command;
};

// A point-in-time view for /metrics and /health.
struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t kv_pages_total = 0;
  int32_t kv_pages_used = 0;     // referenced by requests
  int32_t kv_pages_cached = 0;   // held only by the prefix cache
  int64_t prefix_cache_hit_tokens = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generated_tokens_total = 0;
  int64_t num_preemptions = 0;
  int64_t requests_finished = 0;
  int64_t steps = 0;
  int64_t kv_integrity_violations = 0;  // requests failed by the KV integrity check
  int64_t nonfinite_logit_rows = 0;     // requests failed because their logits held NaN / inf
  int64_t tokens_in_flight = 0;  // prompt + generated tokens of live requests (incl. imports)
  int32_t kv_pages_pinned = 0;   // held by exports and import reservations
  // Tensor / expert parallel: every rank of the group as last gathered (Runner::rank_stats);
  // empty for one process.
  std::vector<RankStats> ranks;
};

// A follower rank of a tensor / expert parallel group (config.parallel set, world rank > 0):
// reserves this rank's KV shard (as many pages as the leader's pool, checked) and runs its
// slice of every batch the leader's engine sends, until the leader's engine shuts down. It
// checks its own KV shard whenever the leader's integrity tracker checks a batch
// (Runner::follow); config.fault_injector (tests) may then flip a bit in this rank's pages.
Status run_engine_follower(const ModelWeights& weights, const EngineConfig& config);

class Engine {
 public:
  // Reserves the KV pool and starts the engine thread. `weights` must outlive the engine.
  static Result<std::unique_ptr<Engine>> create(const ModelWeights& weights, const EngineConfig& config);
  virtual ~Engine() = default;

  // Queues a request. Fails (no stream) for an empty prompt, a prompt plus max_new_tokens
  // beyond the context or the whole pool (out_of_range), or a full queue (resource_exhausted).
  virtual Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request) = 0;
  // Cancels a request: its pages are freed on the engine thread's next turn and its stream
  // ends with FinishReason::kAborted. Unknown / finished ids are ignored, except that a
  // finished export_kv request's pinned export is released.
  virtual void cancel(RequestId id) = 0;
  virtual EngineStats stats() const = 0;
  // Runs kv_audit on the engine thread and returns its verdict (tests, /health?deep=1).
  virtual Status audit() = 0;
  // Changes the KV integrity policy from the next batch on (any thread). Unimplemented when
  // the engine was created without EngineConfig::kv_integrity.
  virtual Status set_kv_integrity(const KvIntegrityPolicy& policy) {
    return unimplemented("KV integrity checks are not switchable on this engine");
  }
  // The current policy; nullopt when not switchable.
  virtual std::optional<KvIntegrityPolicy> kv_integrity() const { return std::nullopt; }
  // MoE routing load since start; nullopt unless EngineConfig::routing_stats on a MoE model.
  virtual std::optional<RoutingSnapshot> routing_stats() const { return std::nullopt; }
  // ---- disaggregation (prefill / decode roles) ----
  // Unpins the pages of a KvExport (any thread). Unknown ids are ignored.
  virtual void release_export(RequestId id) {}
  // Validates `request` like submit(), reserves pages for the KV of its first `num_tokens`
  // prompt tokens (0 < num_tokens < prompt size) and returns them with the request's stream.
  // The request then waits for finish_import (adopt the bytes and decode) or fail_import;
  // cancel() frees its pages too. resource_exhausted when the pool cannot hold them now.
  virtual Result<std::pair<KvImport, std::shared_ptr<RequestStream>>> begin_import(GenerateRequest request,
                                                                                   int32_t num_tokens) {
    return unimplemented("this engine does not import KV");
  }
  // Adopts received pages: tags must still match the reservation and digests the bytes,
  // else the request fails (kError with data_loss) and its pages are freed.
  virtual void finish_import(RequestId id, KvImportData data) {}
  // The transfer failed: pages freed, the stream ends with kError carrying `error`.
  virtual void fail_import(RequestId id, Status error) {}
  // Tensor / expert parallel: runs `payload` on every follower rank between two steps
  // (Runner::command_followers, each follower's EngineConfig::follower_command) and hands
  // back their replies, world rank r at index r - 1 (empty = success). Any thread. One
  // process: an empty vector at once.
  virtual std::future<std::vector<std::string>> run_on_followers(std::vector<uint8_t> payload) {
    std::promise<std::vector<std::string>> none;
    none.set_value({});
    return none.get_future();
  }
  // The pool's layout and, for fp8 static KV, its scales [layer][k|v][kv_head].
  virtual KvLayout kv_layout() const { return {}; }
  virtual std::vector<float> kv_static_scales() const { return {}; }
  // Stops the engine thread; pending requests end with kAborted.
  virtual void shutdown() = 0;
};

}  // namespace densa
