#pragma once
// DisaggFollower: a follower rank's half of prefill/decode disaggregation between tensor /
// expert parallel groups. Every rank of a group holds its own shard of each KV page (the same
// page ids as rank 0, its own heads; MLA's latent rows whole on every rank), so every rank
// moves its own shard: prefill rank r sends to decode rank r over UCX. Rank 0's DisaggWorker
// drives it; the commands reach a follower through Engine::run_on_followers, between two steps
// of its group, and run here on the follower's thread with its pool.
//
// Commands (JSON payloads; the reply, also JSON unless noted, goes back to rank 0):
//   {"op":"send", transfer_id, num_tokens, pages, page_tags, layouts, addresses, timeout_ms}
//       prefill follower: converts its pages [pages] into the decode rank's layout
//       (layouts[world rank]: the decode side's descriptor with that rank's static scales),
//       sends them to addresses[world rank] and flushes -> {"wire_bytes":N} or {"error":"..."}.
//   {"op":"recv", transfer_id, page_tags, page_bytes, timeout_ms}
//       decode follower: posts the receives on a pooled UCX worker, progressed by a thread of
//       its own from then on -> {"address":"<hex>", "static_scales":[..] (fp8 static KV: this
//       rank's, which the sender converts with)} or {"error":"..."}.
//   {"op":"adopt", transfer_id, pages}
//       decode follower: waits (until the transfer's deadline) for every page to arrive
//       verified, then copies them into its pool and re-checks each page's digest there
//       -> "" or an error message (Engine's KvImportData::followers_adopt convention).
//   {"op":"done", transfer_id, "recycle":bool}
//       decode follower: the sender's flush is confirmed (recycle) or the transfer is
//       abandoned: its thread stops, its worker goes back to the pool or is destroyed -> "".
// A command for an unknown transfer is answered with an error, never a crash.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "disagg/ucx_pool.h"
#include "kv/page_pool.h"

namespace densa::server {

// Lower-case hex of UCX worker addresses on the control plane.
std::string hex_of(std::span<const uint8_t> bytes);
std::optional<std::vector<uint8_t>> bytes_of_hex(const std::string& s);

class DisaggFollower {
 public:
  // `ucx` must outlive the follower; `world_rank` picks this rank's address in a send order;
  // `static_scales`: this rank's fp8 static KV scales (its kv heads), empty otherwise.
  DisaggFollower(const disagg::UcxContext& ucx, int world_rank, std::vector<float> static_scales = {});
  ~DisaggFollower();  // stops every receive thread (each bounded by its transfer's deadline)

  // Runner::CommandHandler: one command on this rank's pool.
  std::string handle(std::span<const uint8_t> payload, PagePool& pool);

 private:
  struct Transfer;
  std::string send(const std::string& payload, PagePool& pool);
  std::string receive(const std::string& payload, PagePool& pool);
  std::string adopt(const std::string& payload, PagePool& pool);
  std::string done(const std::string& payload);

  const int world_rank_;
  const std::vector<float> static_scales_;
  disagg::UcxWorkerPool ucx_pool_;
  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<Transfer>> transfers_;  // decode side, by transfer id
};

}  // namespace densa::server
