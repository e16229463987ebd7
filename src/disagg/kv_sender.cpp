#include "disagg/kv_sender.h"

#include <algorithm>

#include "disagg/disagg_error.h"
#include "disagg/kv_wire.h"

namespace densa::disagg {

std::vector<std::vector<uint8_t>> build_page_messages(const KvPageFormat& from, std::span<const uint8_t* const> pages,
                                                      int32_t num_tokens, const KvPageFormat& to,
                                                      uint64_t transfer_id, std::span<const uint32_t> page_tags) {
  CHECK(page_tags.size() == pages.size()) << pages.size() << " pages but " << page_tags.size() << " tags";
  const int32_t P = to.layout.page_size;
  const size_t payload = static_cast<size_t>(to.layout.page_bytes());
  std::vector<std::vector<uint8_t>> out(pages.size());
  for (size_t k = 0; k < pages.size(); ++k) {
    std::vector<uint8_t>& m = out[k];
    m.resize(static_cast<size_t>(kv_page_message_bytes(to.layout)));
    const int32_t tokens = std::clamp<int32_t>(num_tokens - static_cast<int32_t>(k) * P, 0, P);
    convert_kv_page(from, pages[k], to, tokens, m.data() + kKvPageHeaderBytes);
    KvPageHeader h;
    h.transfer_id = transfer_id;
    h.page_idx = static_cast<uint32_t>(k);
    h.num_pages = static_cast<uint32_t>(pages.size());
    h.page_tag = page_tags[k];
    h.num_tokens = static_cast<uint32_t>(tokens);
    h.digest = payload_digest({m.data() + kKvPageHeaderBytes, payload});
    h.payload_bytes = payload;
    write_page_header(h, m);
  }
  return out;
}

Result<int64_t> send_page_messages(UcxWorkerPool& pool, const KvSendOrder& order,
                                   const std::vector<std::vector<uint8_t>>& messages,
                                   std::chrono::steady_clock::time_point deadline) {
  if (static_cast<int64_t>(messages.size()) > kKvMaxPagesPerTransfer)
    return kv_transfer_failed("a transfer of " + std::to_string(messages.size()) + " pages is past the " +
                              std::to_string(kKvMaxPagesPerTransfer) + " its " + std::to_string(kKvPageIdxBits) +
                              "-bit page index tells apart");
  Result<std::unique_ptr<UcxWorker>> worker = pool.acquire(order.peer_address);
  if (!worker.is_ok()) return kv_transfer_failed(worker.status().message());
  std::unique_ptr<UcxWorker> w = std::move(worker).value();
  // Every early return hands the worker back as failed: destroyed, not pooled, and counted.
  struct Discard {
    UcxWorkerPool& pool;
    std::unique_ptr<UcxWorker>& worker;
    ~Discard() {
      if (worker != nullptr) pool.release(std::move(worker), /*keep=*/false);
    }
  } discard{pool, w};
  int64_t bytes = 0;
  for (size_t k = 0; k < messages.size(); ++k) {
    Result<size_t> op = w->post_send(page_message_tag(order.transfer_id, static_cast<uint32_t>(k)), messages[k]);
    if (!op.is_ok()) return kv_transfer_failed(op.status().message());
    bytes += static_cast<int64_t>(messages[k].size());
  }
  if (Status s = w->wait_all(deadline, [] { return false; }); !s.is_ok()) {
    return kv_transfer_failed("sending " + std::to_string(messages.size()) + " pages: " + s.message());
  }
  if (Status s = w->flush_endpoint(deadline); !s.is_ok()) return kv_transfer_failed(s.message());
  pool.release(std::move(w));
  return bytes;
}

}  // namespace densa::disagg
