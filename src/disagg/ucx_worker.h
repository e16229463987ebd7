#pragma once
// Thin RAII wrappers over UCX's ucp layer (tag messaging only), the data plane of KV
// transfers. UcxContext: one per process, reads the UCX_* environment (UCX_TLS picks tcp,
// shared memory, RDMA ...). UcxWorker: serves one transfer at a time, used by one thread at a
// time (workers move between threads through UcxWorkerPool); it owns its ucp_worker, at most
// one endpoint and the transfer's in-flight operations. The destructor cancels what is
// pending and closes the endpoint. Peers exchange ucp_worker addresses out of band (the HTTP
// control plane).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"

struct ucp_context;
struct ucp_worker;
struct ucp_ep;

namespace densa::disagg {

class UcxContext {
 public:
  static Result<std::unique_ptr<UcxContext>> create();
  ~UcxContext();
  ucp_context* handle() const { return ctx_; }

 private:
  explicit UcxContext(ucp_context* ctx) : ctx_(ctx) {}
  ucp_context* ctx_;
};

class UcxWorker {
 public:
  using Clock = std::chrono::steady_clock;

  static Result<std::unique_ptr<UcxWorker>> create(const UcxContext& context);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // This worker's address, for the peer's connect().
  const std::vector<uint8_t>& address() const { return address_; }
  // Opens the one endpoint to a peer worker (peer failures surface as op errors).
  Status connect(std::span<const uint8_t> peer_address);
  // The address connect() was given; empty when not connected.
  const std::vector<uint8_t>& peer() const { return peer_; }

  // Posts a tagged send (the endpoint must be connected) or a receive of exactly `tag` into
  // `buffer` (which must stay alive until the op completes or the worker dies). Returns the
  // op's index.
  Result<size_t> post_send(uint64_t tag, std::span<const uint8_t> buffer);
  Result<size_t> post_recv(uint64_t tag, std::span<uint8_t> buffer);

  // One round of progress; true if anything happened.
  bool progress();
  // nullopt while op `i` runs; then ok with the bytes moved, or its error.
  std::optional<Result<size_t>> op_result(size_t i);
  size_t num_ops() const { return ops_.size(); }

  // Progresses until every op has completed, one failed, `deadline` passes or `stop()`
  // returns true; the first failure (or a timeout) is the result.
  template <typename Stop>
  Status wait_all(Clock::time_point deadline, Stop stop);

  // Waits until everything sent on the endpoint has reached the peer; the endpoint stays open.
  Status flush_endpoint(Clock::time_point deadline);
  // Flushes and closes the endpoint (graceful), within `deadline`.
  Status close_endpoint(Clock::time_point deadline);

  // True when this worker may serve another transfer: every op completed without error, no
  // flush or close failed, and no message waits unmatched (one would be a leftover of some
  // other transfer: it can never match a later transfer's tags, but it would sit in UCX's
  // unexpected queue, and it says the peer sent what nobody asked for).
  bool reusable();
  // True when a message waits in this worker that no posted receive matched (after one
  // round of progress).
  bool has_unmatched_message();
  // Forgets the completed ops, so the next transfer's op indices start at 0. Needs reusable().
  void clear_ops();

 private:
  struct Op {
    void* request = nullptr;  // ucp request, or null once complete
    bool is_recv = false;
    bool done = false;
    Status status;
    size_t bytes = 0;
  };
  UcxWorker(ucp_worker* worker, std::vector<uint8_t> address) : worker_(worker), address_(std::move(address)) {}
  void cancel_pending();
  void wait_idle();  // brief sleep when progress found nothing to do
  // Progresses until `request` (a flush or close) completes or `deadline` passes, then frees it.
  Status wait_request(void* request, Clock::time_point deadline, const char* what);

  ucp_worker* worker_;
  ucp_ep* ep_ = nullptr;
  bool broken_ = false;  // a flush or close failed: the worker is not reused
  std::vector<uint8_t> address_;
  std::vector<uint8_t> peer_;
  std::vector<Op> ops_;
};

template <typename Stop>
Status UcxWorker::wait_all(Clock::time_point deadline, Stop stop) {
  while (true) {
    const bool moved = progress();
    bool all = true;
    for (size_t i = 0; i < ops_.size(); ++i) {
      std::optional<Result<size_t>> r = op_result(i);
      if (!r) {
        all = false;
        continue;
      }
      if (!r->is_ok()) return r->status();
    }
    if (all) return Status::ok();
    if (stop()) return unavailable("transfer stopped");
    if (Clock::now() >= deadline) return unavailable("timed out waiting for UCX operations");
    if (!moved) wait_idle();
  }
}

}  // namespace densa::disagg
