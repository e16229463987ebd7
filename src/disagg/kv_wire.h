#pragma once
// The KV wire format. One UCX tagged message per page:
//   [KvPageHeader, 48 bytes little-endian][payload: the page in the receiver's format]
// sent with the UCX tag (transfer_id << 24 | page_idx), so every page lands in its own
// receive buffer. The header repeats what the receiver checks before it believes a page:
// which transfer and page it is, the page tag the receiver reserved it under, and the xxh3
// digest (kv/page_digest.h's hash) of the payload.
#include <cstdint>
#include <optional>
#include <span>

#include "core/status.h"
#include "kernels/kv_view.h"

namespace densa::disagg {

inline constexpr uint32_t kKvWireMagic = 0x4b56444eu;  // "NDVK"
inline constexpr uint16_t kKvWireVersion = 1;
inline constexpr int kKvPageIdxBits = 24;
inline constexpr uint64_t kKvTransferIdMask = (uint64_t{1} << 40) - 1;

struct KvPageHeader {
  uint64_t transfer_id = 0;   // < 2^40
  uint32_t page_idx = 0;      // index into the transfer's page list
  uint32_t num_pages = 0;
  uint32_t page_tag = 0;      // the receiver's PagePool tag for this page when reserved
  uint32_t num_tokens = 0;    // valid token slots in the page
  uint64_t digest = 0;        // xxh3-64 of the payload
  uint64_t payload_bytes = 0;
};

inline constexpr size_t kKvPageHeaderBytes = 48;

// Bytes of one page message for a receiver whose pages are laid out as `to`: the header plus
// a whole page (a partial last page is sent whole, its unused slots zero). A transfer of n
// pages puts n times this on the wire; send_page_messages returns that sum.
inline int64_t kv_page_message_bytes(const KvLayout& to) {
  return static_cast<int64_t>(kKvPageHeaderBytes) + to.page_bytes();
}

void write_page_header(const KvPageHeader& h, std::span<uint8_t> out);  // out.size() >= 48
Result<KvPageHeader> read_page_header(std::span<const uint8_t> in);

// A transfer's pages are told apart by the low kKvPageIdxBits bits of their message tags, so a
// transfer holds at most this many pages: one more and page 0's tag would be reused, and the
// receiver would fill the wrong staging slot. Senders and receivers refuse longer transfers,
// and densa serve refuses at start a prefill / decode worker whose longest request needs more.
inline constexpr int64_t kKvMaxPagesPerTransfer = int64_t{1} << kKvPageIdxBits;

// ok when a request of `max_request_tokens` in pages of `page_size` fits one transfer; else
// out_of_range naming the page index width (densa serve --role prefill|decode at start-up).
inline Status check_transfer_page_index_width(int64_t max_request_tokens, int page_size) {
  const int64_t pages = (max_request_tokens + page_size - 1) / page_size;
  if (pages <= kKvMaxPagesPerTransfer) return Status::ok();
  return out_of_range("a request of " + std::to_string(max_request_tokens) + " tokens needs " + std::to_string(pages) +
                      " KV pages of " + std::to_string(page_size) + " tokens in one transfer, past the " +
                      std::to_string(kKvMaxPagesPerTransfer) + " the " + std::to_string(kKvPageIdxBits) +
                      "-bit page index of a transfer's message tags tells apart; use a larger --page-size");
}

inline uint64_t page_message_tag(uint64_t transfer_id, uint32_t page_idx) {
  return (transfer_id & kKvTransferIdMask) << kKvPageIdxBits | (page_idx & ((1u << kKvPageIdxBits) - 1));
}

// xxh3-64 of a payload (the same hash page_digest() takes of a page in the pool).
uint64_t payload_digest(std::span<const uint8_t> payload);

}  // namespace densa::disagg
