#pragma once
// DisaggWorker: the HTTP side of prefill/decode disaggregation for one `densa serve`.
//
// Control plane (HTTP, JSON):
//   GET  /disagg/v1/layout    (every role) this worker's KV layout descriptor
//   POST /disagg/v1/prefill   (prefill role) compute a prompt's KV and push its pages over UCX:
//     {"tokens":[..], "transfer_id":N, "ucx_address":"<hex>", "page_tags":[..],
//      "layout":{<the decode side's descriptor>}, "timeout_ms":N,
//      "ucx_addresses":["<hex>", ..] (a decode group: one per world rank, rank 0's first)}
//     -> 200 {"num_pages","num_tokens","wire_bytes"} once every page has reached the decode
//        worker, or an OpenAI-style error (code kv_layout_mismatch / kv_transfer_failed).
// Data plane: UCX tag messages, one per page (disagg/kv_wire.h).
//
// Decode role: submit() reserves pages for the prompt's first n-1 tokens (the last prompt
// token is fed locally, so sampling, seeds and logprobs stay on the decode side exactly as
// colocated), returns the request's stream at once and runs the transfer on its own thread:
// receiver up, POST to the prefill worker, pages verified, Engine::finish_import. Any failure
// ends the stream with kv_transfer_failed / kv_layout_mismatch and frees the pages.
//
// Tensor / expert parallel groups (group_size > 1, this worker on world rank 0): each rank holds
// its own shard of every page, and prefill rank r sends its shard to decode rank r. Both groups
// must have the same world size (and per-rank layout: the descriptor check), else the prefill
// side answers kv_layout_mismatch. Rank 0 drives the other ranks' DisaggFollower through
// Engine::run_on_followers: on the decode side "recv" (their addresses go in the order), the
// import's followers_adopt (every rank adopts its shard before rank 0 does) and "done"; on the
// prefill side "send", while rank 0 sends its own shard. A follower's share of a command holds
// its group's step loop for that long (the prefill side's conversion and send; the decode
// side's wait for its pages), bounded by the transfer's timeout.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/status.h"
#include "disagg/kv_layout_descriptor.h"
#include "disagg/ucx_pool.h"
#include "engine/engine.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace densa::server {

struct ServingContext;

enum class ServeRole : uint8_t { kBoth, kPrefill, kDecode };

// Transfer counters of one worker (both roles), rendered into /metrics beside Metrics:
// densa_kv_transfer_bytes_total (bytes on the wire: sent by a prefill worker, received by a
// decode worker), densa_kv_transfer_failures_total, the gauge densa_tokens_in_flight, and the
// UCX worker pool's counts (densa_ucx_workers_{created,reused,discarded,expired}_total, the
// gauges densa_ucx_workers_idle and densa_ucx_workers_live) while a DisaggWorker with UCX is alive.
struct DisaggMetrics {
  std::atomic<uint64_t> kv_transfer_bytes{0};
  std::atomic<uint64_t> kv_transfer_failures{0};
  std::atomic<const disagg::UcxWorkerPool*> ucx_pool{nullptr};

  void count_bytes(int64_t bytes) { kv_transfer_bytes += static_cast<uint64_t>(bytes); }
  void count_failure() { ++kv_transfer_failures; }
  std::string render(const EngineStats& stats) const;
};
const char* serve_role_name(ServeRole role);

// The request header naming the prefill worker of a request sent to a decode worker.
inline constexpr const char* kPrefillUrlHeader = "X-Densa-Prefill-Url";

class DisaggWorker {
 public:
  // `ucx` may be null for role kBoth (no transfers); it must outlive the worker. Up to
  // `ucx_idle_workers` UCX workers are kept between transfers (0: fresh ones every time), each
  // closed once idle for `ucx_idle_ms`.
  DisaggWorker(ServingContext& ctx, ServeRole role, const disagg::UcxContext* ucx, int timeout_ms,
               int ucx_idle_workers = 16, int ucx_idle_ms = 60000, int group_size = 1);
  ~DisaggWorker();  // waits for transfer threads (each bounded by the timeout)

  void register_routes(httplib::Server& http);
  ServeRole role() const { return role_; }
  const disagg::KvLayoutDescriptor& descriptor() const { return descriptor_; }

  // Decode role: see the file comment. Fails without a stream only when the request is
  // invalid or the pages cannot be reserved now.
  Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request, const std::string& prefill_url);

 private:
  void handle_layout(httplib::Response& res) const;
  void handle_prefill(const httplib::Request& req, httplib::Response& res);
  // Prefill role: waits on `stream` (a prompt submitted with export_kv) for its KV export;
  // null with `*failed` set when the prefill fails or `deadline` passes (the request is then
  // cancelled).
  std::shared_ptr<const KvExport> wait_for_export(RequestStream& stream, std::chrono::steady_clock::time_point deadline,
                                                  Status* failed);
  void run_import(KvImport import, std::vector<TokenId> tokens, std::string prefill_url,
                  const std::string& cache_salt);
  // Receives and verifies the pages, hands them to the engine (finish_import) and then waits
  // for the prefill worker's answer. Returns an error only before finish_import.
  Status import_pages(const KvImport& import, const std::vector<TokenId>& tokens, const std::string& prefill_url,
                      const std::string& cache_salt);

  ServingContext& ctx_;
  const ServeRole role_;
  const disagg::UcxContext* ucx_;
  std::unique_ptr<disagg::UcxWorkerPool> ucx_pool_;  // null without UCX
  const int timeout_ms_;
  const int group_size_;
  const disagg::KvLayoutDescriptor descriptor_;
  // Decode group: every follower's share of a command; a failed reply names its rank. The
  // replies of a recv are the followers' UCX addresses.
  Result<std::vector<std::string>> on_followers(const nlohmann::json& command) const;

  std::mutex mu_;
  std::condition_variable cv_;
  int num_threads_ = 0;  // transfer threads alive
};

}  // namespace densa::server
