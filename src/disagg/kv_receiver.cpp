#include "disagg/kv_receiver.h"

#include <cstring>

#include "disagg/disagg_error.h"
#include "disagg/kv_wire.h"

namespace densa::disagg {

Status verify_page_message(std::span<const uint8_t> message, uint64_t transfer_id, uint32_t page_idx,
                           uint32_t num_pages, uint32_t expected_tag, int64_t page_bytes, KvImportData& data) {
  Result<KvPageHeader> header = read_page_header(message);
  if (!header.is_ok()) return header.status();
  const KvPageHeader& h = *header;
  const std::string which = "page " + std::to_string(page_idx) + " of " + std::to_string(num_pages);
  if (h.transfer_id != (transfer_id & kKvTransferIdMask) || h.page_idx != page_idx || h.num_pages != num_pages) {
    return kv_transfer_failed(which + ": the message belongs to transfer " + std::to_string(h.transfer_id) +
                              " page " + std::to_string(h.page_idx) + " of " + std::to_string(h.num_pages));
  }
  if (h.page_tag != expected_tag) {
    return kv_transfer_failed(which + ": write for page tag " + std::to_string(h.page_tag) +
                              " but the page was reserved under tag " + std::to_string(expected_tag) +
                              "; write rejected");
  }
  if (h.payload_bytes != static_cast<uint64_t>(page_bytes) ||
      message.size() != kKvPageHeaderBytes + static_cast<size_t>(page_bytes)) {
    return kv_transfer_failed(which + ": " + std::to_string(message.size()) + " bytes, expected " +
                              std::to_string(kKvPageHeaderBytes + page_bytes) + " (page layouts differ)");
  }
  const std::span<const uint8_t> payload = message.subspan(kKvPageHeaderBytes);
  const uint64_t found = payload_digest(payload);
  if (found != h.digest) {
    return kv_transfer_failed(which + ": digest mismatch (sent " + std::to_string(h.digest) + ", received " +
                              std::to_string(found) + ")");
  }
  data.digests.push_back(h.digest);
  data.tags.push_back(h.page_tag);
  return Status::ok();
}

Result<std::unique_ptr<KvReceiver>> KvReceiver::create(UcxWorkerPool& pool, uint64_t transfer_id,
                                                       std::vector<uint32_t> page_tags, int64_t page_bytes) {
  if (static_cast<int64_t>(page_tags.size()) > kKvMaxPagesPerTransfer)
    return kv_transfer_failed("a transfer of " + std::to_string(page_tags.size()) + " pages is past the " +
                              std::to_string(kKvMaxPagesPerTransfer) + " its " + std::to_string(kKvPageIdxBits) +
                              "-bit page index tells apart");
  Result<std::unique_ptr<UcxWorker>> worker = pool.acquire();
  if (!worker.is_ok()) return kv_transfer_failed(worker.status().message());
  std::unique_ptr<KvReceiver> r(
      new KvReceiver(pool, std::move(worker).value(), transfer_id, std::move(page_tags), page_bytes));
  for (size_t k = 0; k < r->tags_.size(); ++k) {
    const std::span<uint8_t> buffer(r->staging_.data() + k * r->stride_, r->stride_);
    Result<size_t> op = r->worker_->post_recv(page_message_tag(transfer_id, static_cast<uint32_t>(k)), buffer);
    if (!op.is_ok()) return kv_transfer_failed(op.status().message());
  }
  return r;
}

KvReceiver::KvReceiver(UcxWorkerPool& pool, std::unique_ptr<UcxWorker> worker, uint64_t transfer_id,
                       std::vector<uint32_t> tags, int64_t page_bytes)
    : pool_(pool),
      worker_(std::move(worker)),
      transfer_id_(transfer_id),
      tags_(std::move(tags)),
      page_bytes_(page_bytes),
      // One byte more than a valid message, so an oversized one shows as a size mismatch
      // instead of UCX truncation.
      stride_(kKvPageHeaderBytes + static_cast<size_t>(page_bytes) + 1),
      staging_(tags_.size() * stride_) {}

KvReceiver::~KvReceiver() {
  if (worker_ != nullptr) pool_.release(std::move(worker_), /*keep=*/false);
}

bool KvReceiver::recycle() {
  CHECK(worker_ != nullptr) << "KvReceiver recycled twice";
  return pool_.release(std::move(worker_));
}

Result<KvImportData> KvReceiver::verify_all() {
  KvImportData data;
  for (size_t k = 0; k < tags_.size(); ++k) {
    std::optional<Result<size_t>> got = worker_->op_result(k);
    CHECK(got.has_value() && got->is_ok()) << "verify_all before every page arrived";
    const std::span<const uint8_t> message(staging_.data() + k * stride_, **got);
    DENSA_RETURN_IF_ERROR(verify_page_message(message, transfer_id_, static_cast<uint32_t>(k),
                                              static_cast<uint32_t>(tags_.size()), tags_[k], page_bytes_, data));
  }
  // Every message is verified and no receive is pending: the buffer is the engine's now.
  data.bytes = std::move(staging_);
  data.offset = kKvPageHeaderBytes;
  data.stride = stride_;
  return data;
}

}  // namespace densa::disagg
