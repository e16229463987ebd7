#pragma once
// IntegrityTracker: the seam where a batch's KV references are verified before forward reads
// cached KV (architecture.md, idea 3). The runner calls verify() with the batch's block tables
// whenever a chunk reads KV written by an earlier step; a non-ok verdict fails that request
// (FinishReason::kError) instead of letting it read another request's data. The default is
// no tracker (nullptr): nothing is checked. A later issue supplies the tag-checking tracker.
#include <span>

#include "core/status.h"
#include "kv/block_table.h"
#include "kv/page_pool.h"

namespace densa {

class IntegrityTracker {
 public:
  virtual ~IntegrityTracker() = default;
  // tables: [num_seqs] the batch's block tables; verdicts: [num_seqs], all ok on entry.
  virtual void verify(const PagePool& pool, std::span<const BlockTable* const> tables,
                      std::span<Status> verdicts) = 0;
};

}  // namespace densa
