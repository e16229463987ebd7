#pragma once
// DisaggLedger: the pages an engine holds for prefill/decode disaggregation outside its
// scheduler, owned by the engine thread (nothing here locks):
//  - exports: a finished export_kv request's pages, pinned (one reference each) until the
//    sender has copied them out (Engine::release_export) or the request is cancelled;
//  - imports: pages reserved, pinned, for a request whose prompt KV is on its way
//    (Engine::begin_import), until its bytes are adopted, the transfer fails or it is
//    cancelled; the request and its stream wait here meanwhile.
// Both count in kv_audit's references (tables()) and in EngineStats::kv_pages_pinned.
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/engine_types.h"
#include "engine/request_stream.h"
#include "kv/block_table.h"
#include "kv/page_pool.h"
#include "kv/radix_cache.h"
#include "sched/request.h"

namespace densa {

class DisaggLedger {
 public:
  struct Import {
    std::unique_ptr<Request> request;
    std::shared_ptr<RequestStream> stream;
    int32_t num_tokens = 0;  // prompt tokens whose KV is imported
    // Pages reserved: kv_transfer_us runs from here to adoption.
    std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
  };

  // An export's pages stay pinned: `table` holds one reference to each (taken by the
  // scheduler when the request finished).
  void pin_export(RequestId id, const BlockTable& table) { exports_.emplace(id, table); }
  // Unpins an export's pages; false for an id that holds none (released already, or unknown).
  bool release_export(RequestId id, PagePool& pool);

  // Reserves pages for the KV of `num_tokens` tokens of `request` (evicting from the prefix
  // cache when the pool is short): their ids and tags, or resource_exhausted.
  Result<KvImport> reserve_import(std::unique_ptr<Request> request, std::shared_ptr<RequestStream> stream,
                                  int32_t num_tokens, int32_t page_size, PagePool& pool, RadixCache& cache);
  // The import leaves the ledger with its pages still reserved (the caller adopts or frees
  // them); nullopt when it is not here (cancelled meanwhile).
  std::optional<Import> take_import(RequestId id);
  // A cancelled import: its pages freed; the import (for its stream's end) or nullopt.
  std::optional<Import> cancel_import(RequestId id, PagePool& pool);
  // Shutdown: every export unpinned, every import's pages freed; the imports are returned so
  // their streams can end.
  std::vector<Import> release_all(PagePool& pool);

  // Writes an import's received bytes into its reserved pages. Every check comes before the
  // first write (a rejected import leaves its pages untouched): the byte count, each page's
  // tag in the pool, as reserved and as written for; after each copy the page's digest in the
  // pool must equal the sent one. data_loss ("kv_transfer_failed: ...") otherwise.
  static Status adopt(PagePool& pool, const BlockTable& table, const KvImportData& data);
  // adopt's write without its tag checks (a follower rank's shard, whose pool does not keep
  // the leader's tags): data must hold one page and one digest per page (checked before any
  // write); page k goes to pages[k], and its digest in the pool must equal the sent one.
  static Status write_pages(PagePool& pool, std::span<const PageId> pages, const KvImportData& data);

  // Every pinned table (kv_audit's references), pinned pages, and the tokens of imports.
  void tables(std::vector<const BlockTable*>& out) const;
  int32_t pinned_pages() const;
  int64_t import_tokens() const;

 private:
  std::unordered_map<RequestId, BlockTable> exports_;
  std::unordered_map<RequestId, Import> imports_;
};

}  // namespace densa
