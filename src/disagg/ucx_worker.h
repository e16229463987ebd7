#pragma once
// Thin RAII wrappers over UCX's ucp layer (tag messaging only), the data plane of KV
// transfers. UcxContext: one per process, reads the UCX_* environment (UCX_TLS picks tcp,
// shared memory, RDMA ...). UcxWorker: one per transfer, used by one thread at a time; it
// owns its ucp_worker, at most one endpoint and its in-flight operations, and nothing of it
// outlives the transfer: the destructor cancels what is pending and closes the endpoint.
// Peers exchange ucp_worker addresses out of band (the HTTP control plane).
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

  // Flushes and closes the endpoint (graceful), within `deadline`.
  Status close_endpoint(Clock::time_point deadline);

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

  ucp_worker* worker_;
  ucp_ep* ep_ = nullptr;
  std::vector<uint8_t> address_;
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
