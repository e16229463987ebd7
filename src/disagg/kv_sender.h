#pragma once
// The sending half of a KV transfer (prefill role): converts exported pages into the
// receiver's format, wraps each in a KvPageHeader with its digest and the receiver's page
// tag, and sends them over UCX to the receiver's worker address.
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "disagg/kv_page_convert.h"
#include "disagg/ucx_pool.h"

namespace densa::disagg {

// What the receiver asked for (from the control plane).
struct KvSendOrder {
  uint64_t transfer_id = 0;
  std::vector<uint8_t> peer_address;   // the receiver's UcxWorker address
  std::vector<uint32_t> page_tags;     // [num_pages] the receiver's reserved page tags
};

// One message per page: header + the page converted from `from` into `to` (tokens
// [0, num_tokens) across `pages`; the last page may be partial). Needs page_tags.size() ==
// pages.size(). Reads the source pages only here: they may be released afterwards.
std::vector<std::vector<uint8_t>> build_page_messages(const KvPageFormat& from, std::span<const uint8_t* const> pages,
                                                      int32_t num_tokens, const KvPageFormat& to,
                                                      uint64_t transfer_id, std::span<const uint32_t> page_tags);

// Sends the messages on a worker from `pool` connected to the receiver (kept from an earlier
// transfer to the same receiver, or fresh) and flushes it, all before `deadline`; the worker
// goes back to the pool only when everything went through. Returns the bytes put on the wire;
// kv_transfer_failed on any UCX error or timeout.
Result<int64_t> send_page_messages(UcxWorkerPool& pool, const KvSendOrder& order,
                                   const std::vector<std::vector<uint8_t>>& messages,
                                   std::chrono::steady_clock::time_point deadline);

}  // namespace densa::disagg
