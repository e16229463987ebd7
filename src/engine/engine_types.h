#pragma once
// What crosses the engine boundary: a request in, a stream of events out. No JSON, no text
// formatting here (server/ maps these to the OpenAI API).
#include <chrono>
#include <memory>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "engine/request_timeline.h"
#include "kernels/kv_view.h"
#include "kv/fault_injection.h"
#include "sample/sampler.h"
#include "sample/token_constraint.h"
#include "sched/request.h"  // RequestId, FinishReason

namespace densa {

struct GenerateRequest {
  std::vector<TokenId> prompt;          // with BOS, already tokenized
  SamplingParams sampling;              // temperature 0 = greedy
  int max_new_tokens = 16;
  bool ignore_eos = false;
  std::vector<TokenId> stop_token_ids;  // finish (reason stop) when one is sampled
  int num_top_logprobs = -1;            // -1: no logprobs; 0..20: chosen token + that many alternatives
  std::optional<bool> kv_integrity;     // true / false overrides the engine's KV integrity policy
  // Prefill-only (disaggregation): on a normal finish the final TokenEvent carries a KvExport
  // of the prompt's KV, pinned until Engine::release_export.
  bool export_kv = false;
  // Structured output / tool-call grammar (sample/token_constraint.h): one per request, it
  // masks each sample; null: unconstrained.
  std::shared_ptr<TokenConstraint> constraint;
  // Prefix-cache isolation (vLLM's cache_salt): only requests with the same salt share cached
  // pages; "" shares with every unsalted request.
  std::string cache_salt;
  // Tests and soak runs only (`densa serve --test-allow-fault-injection`): break this
  // request's own KV with this fault at the first step where it fits (kv/fault_injection.h),
  // so the KV integrity check fails it (the error names the request). nullopt: no fault.
  std::optional<KvFault> inject_fault;
};

// The KV of a finished export_kv request: tokens [0, num_tokens) in `pages` (token order),
// pinned (refcount held) so no step reallocates or writes them until Engine::release_export.
// Readable from any thread while pinned.
struct KvExport {
  RequestId id{};
  KvLayout layout;
  std::vector<PageId> pages;           // [num_pages]
  int32_t num_tokens = 0;
  std::vector<const uint8_t*> data;    // [num_pages] page bytes (layout.page_bytes() each)
  std::vector<float> static_scales;    // [layer][k|v][kv_head] when layout is fp8 static
};

// Pages reserved for a request whose prompt KV is about to arrive (Engine::begin_import).
struct KvImport {
  RequestId id{};
  int32_t num_tokens = 0;              // tokens whose KV will be imported
  std::vector<PageId> pages;           // [num_pages] reserved, pinned, in token order
  std::vector<uint32_t> tags;          // [num_pages] their tags when reserved
};

// The bytes that arrived for an import: page i of the reservation, already verified against
// `digests[i]` by the receiver; the engine re-checks tags and digests before adopting them.
struct KvImportData {
  // Page k's bytes start at bytes[offset + k * stride] (stride 0: page_bytes, pages back to
  // back). A receiver hands over its receive buffer, message headers and all, instead of
  // copying every page out of it.
  std::vector<uint8_t> bytes;
  size_t offset = 0;
  size_t stride = 0;
  std::vector<uint64_t> digests;       // [num_pages] xxh3 of each page's bytes
  std::vector<uint32_t> tags;          // [num_pages] the tag each page was written for
  // Tensor / expert parallel: a command every follower rank runs (Engine::run_on_followers)
  // before the leader adopts these pages, so each rank takes its own shard of them first; a
  // non-empty reply fails the import, naming the rank. Empty: none (one process).
  std::vector<uint8_t> followers_adopt;

  size_t page_stride(int64_t page_bytes) const { return stride != 0 ? stride : static_cast<size_t>(page_bytes); }
  // Whether `bytes` holds `num_pages` pages of `page_bytes` at this offset and stride.
  bool holds(size_t num_pages, int64_t page_bytes) const {
    return num_pages == 0 || (page_stride(page_bytes) >= static_cast<size_t>(page_bytes) &&
                              bytes.size() >= offset + (num_pages - 1) * page_stride(page_bytes) +
                                                  static_cast<size_t>(page_bytes));
  }
  const uint8_t* page(size_t k, int64_t page_bytes) const {
    return bytes.data() + offset + k * page_stride(page_bytes);
  }
};

// One generated token, or the final event. The last event of a request has finish != kNone;
// it may carry a token (the one that hit the limit) or none (error / abort).
struct TokenEvent {
  std::optional<TokenId> token;
  float logprob = 0.0f;
  std::vector<std::pair<TokenId, float>> top_logprobs;
  FinishReason finish = FinishReason::kNone;
  Status error;                 // set when finish == kError
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;  // prompt tokens served from the prefix cache
  std::chrono::steady_clock::time_point time;
  std::optional<RequestTimeline> timeline;  // on the final event only: where the time went
  std::shared_ptr<const KvExport> kv_export;  // final event of an export_kv request
};

}  // namespace densa
