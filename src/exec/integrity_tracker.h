#pragma once
// IntegrityTracker: the seam where a batch's KV references are verified before forward reads
// cached KV (architecture.md, idea 3). The runner calls verify() with the batch's block tables
// whenever a chunk reads KV written by an earlier step; a non-ok verdict fails that request
// (FinishReason::kError) instead of letting it read another request's data. The default is
// no tracker (nullptr): nothing is checked. exec/tag_tracker.h has NoopTracker and TagTracker.
#include <optional>
#include <span>

#include "core/status.h"
#include "exec/kv_integrity.h"
#include "kv/block_table.h"
#include "kv/page_pool.h"

namespace densa {

class IntegrityTracker {
 public:
  virtual ~IntegrityTracker() = default;
  // tables: [num_seqs] the batch's block tables; verdicts: [num_seqs], all ok on entry.
  virtual void verify(const PagePool& pool, std::span<const BlockTable* const> tables,
                      std::span<Status> verdicts) = 0;
  // overrides: [num_seqs] each request's override of the tracker's own policy. Trackers
  // without a policy ignore them.
  virtual void verify_batch(const PagePool& pool, std::span<const BlockTable* const> tables,
                            std::span<const IntegrityOverride> overrides, std::span<Status> verdicts) {
    verify(pool, tables, verdicts);
  }
  // False when the tracker checks nothing unless a request forces it: the runner then skips
  // the call (no allocation, no per-token work).
  virtual bool active() const { return true; }
  // The policy the follower ranks of a tensor / expert parallel group apply to their own KV
  // shards (Runner::follow) alongside this tracker's check; nullopt: a tracker the followers
  // cannot mirror, so only this rank's pages are checked.
  virtual std::optional<KvIntegrityPolicy> policy_for_followers() const { return std::nullopt; }
};

}  // namespace densa
