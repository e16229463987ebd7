// KV wire messages (disagg/kv_wire, kv_receiver's verify_page_message): the receiver's check
// of a page message from the network. Input: 16 bytes of what the receiver expects (transfer
// id, page index / count, tag, page bytes), then the message. A message that passes names that
// transfer, page and tag and carries a payload of the expected size with its digest.
#include <cstdint>
#include <cstring>
#include <span>

#include "disagg/kv_receiver.h"
#include "disagg/kv_wire.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa::disagg;
  if (size < 16) return 0;
  uint32_t w[4];
  std::memcpy(w, data, sizeof(w));
  const uint64_t transfer_id = w[0];
  const uint32_t num_pages = (w[1] & 0xffff) + 1;
  const uint32_t page_idx = (w[1] >> 16) % num_pages;
  const uint32_t tag = w[2];
  const int64_t page_bytes = w[3] % 4096;
  const std::span<const uint8_t> message(data + 16, size - 16);

  densa::Result<KvPageHeader> h = read_page_header(message);
  if (h.is_ok()) {
    // What was read writes back to the same 48 bytes but the reserved field.
    uint8_t again[kKvPageHeaderBytes];
    write_page_header(*h, again);
    FUZZ_ASSERT(std::memcmp(again, message.data(), 6) == 0);
    FUZZ_ASSERT(std::memcmp(again + 8, message.data() + 8, kKvPageHeaderBytes - 8) == 0);
  }
  densa::KvImportData imported;
  const densa::Status s = verify_page_message(message, transfer_id, page_idx, num_pages, tag, page_bytes, imported);
  if (s.is_ok()) {
    FUZZ_ASSERT(h.is_ok() && h->page_tag == tag && h->page_idx == page_idx && h->num_pages == num_pages);
    FUZZ_ASSERT(message.size() == kKvPageHeaderBytes + static_cast<size_t>(page_bytes));
    FUZZ_ASSERT(payload_digest(message.subspan(kKvPageHeaderBytes)) == h->digest);
    FUZZ_ASSERT(imported.digests.size() == 1 && imported.tags.size() == 1);
  } else {
    FUZZ_ASSERT(!s.message().empty());
  }
  return 0;
}
