#pragma once
// The receiving half of a KV transfer (decode role). Holds a UcxWorker from a pool, whose
// address goes to the sender, and one receive buffer for all the pages; a page is believed only after its
// header names this transfer and page, carries the tag the page was reserved under (a write
// for a page whose tag changed is rejected) and its payload matches the digest. Nothing is
// written into the page pool here: the engine adopts the verified bytes on its own thread
// (Engine::finish_import), re-checking tags and digests there.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "disagg/ucx_pool.h"
#include "engine/engine_types.h"

namespace densa::disagg {

// Checks one received page message (header + payload) against what the receiver expects;
// on success appends its digest and tag to `data` (the payload stays where it is).
Status verify_page_message(std::span<const uint8_t> message, uint64_t transfer_id, uint32_t page_idx,
                           uint32_t num_pages, uint32_t expected_tag, int64_t page_bytes, KvImportData& data);

class KvReceiver {
 public:
  using Clock = std::chrono::steady_clock;

  // Posts one receive per page of `page_tags` (the reserved pages' tags, token order) on a
  // worker from `pool` (which must outlive the receiver).
  static Result<std::unique_ptr<KvReceiver>> create(UcxWorkerPool& pool, uint64_t transfer_id,
                                                    std::vector<uint32_t> page_tags, int64_t page_bytes);
  // Destroys the worker unless recycle() gave it back.
  ~KvReceiver();
  KvReceiver(const KvReceiver&) = delete;
  KvReceiver& operator=(const KvReceiver&) = delete;

  const std::vector<uint8_t>& address() const { return worker_->address(); }
  // Progresses until every page arrived (then verifies them all), `deadline` passes or
  // `stop()` returns true (the control plane reported a failure). kv_transfer_failed unless
  // every page arrived intact.
  template <typename Stop>
  Result<KvImportData> receive(Clock::time_point deadline, Stop stop);
  // One round of progress (keeps the worker answering while the caller waits elsewhere).
  void progress() { worker_->progress(); }
  // Once the sender has confirmed its flush (nothing of this transfer is still on the way):
  // hands the worker back to the pool, which keeps it only if it is reusable. Returns whether
  // it was kept. The receiver is spent afterwards.
  bool recycle();

 private:
  KvReceiver(UcxWorkerPool& pool, std::unique_ptr<UcxWorker> worker, uint64_t transfer_id, std::vector<uint32_t> tags,
             int64_t page_bytes);
  Result<KvImportData> verify_all();

  UcxWorkerPool& pool_;
  std::unique_ptr<UcxWorker> worker_;
  uint64_t transfer_id_;
  std::vector<uint32_t> tags_;                  // [num_pages]
  int64_t page_bytes_;
  // One receive buffer: message k (header + payload) at k * stride_, handed to the engine
  // as the KvImportData's bytes once every page is verified.
  size_t stride_;
  std::vector<uint8_t> staging_;
};

template <typename Stop>
Result<KvImportData> KvReceiver::receive(Clock::time_point deadline, Stop stop) {
  const Status s = worker_->wait_all(deadline, stop);
  if (!s.is_ok()) return Status(s.code(), "kv_transfer_failed: receiving " + std::to_string(tags_.size()) +
                                              " pages: " + s.message());
  return verify_all();
}

}  // namespace densa::disagg
