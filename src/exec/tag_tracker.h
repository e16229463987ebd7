#pragma once
// The two IntegrityTrackers (architecture.md, idea 3).
//
// NoopTracker: checks nothing; active() is false, so the runner never calls it and a batch
// pays no allocation and no per-token work. The engine's default.
//
// TagTracker: before a batch reads cached KV, one separate pass over every (PageId, expected
// tag) of every checked request gathers the pool's current tags and compares (AVX-512 gather
// where the CPU has it, a tight scalar loop otherwise), outside the attention kernel. Only on a
// mismatch does a slow path find which request and page, and the verdict names the page, both
// tags and the page's recent history. In digest mode it also keeps an xxHash3 of every full
// page (taken the first time it sees the page full) and re-hashes full pages on a sample of
// batches, which catches stray writes and bit flips that leave tags intact. The policy is an
// atomic: any thread may change it; the engine thread reads it once per batch.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "exec/integrity_tracker.h"
#include "exec/kv_integrity.h"
#include "kv/page_digest.h"

namespace densa {

class NoopTracker final : public IntegrityTracker {
 public:
  void verify(const PagePool&, std::span<const BlockTable* const>, std::span<Status>) override {}
  bool active() const override { return false; }
};

class TagTracker final : public IntegrityTracker {
 public:
  explicit TagTracker(const KvIntegrityPolicy& policy = {KvIntegrityMode::kTags, 1, 1});

  // Any thread. sample_every / digest_every below 1 count as 1.
  void set_policy(const KvIntegrityPolicy& policy);
  KvIntegrityPolicy policy() const;

  void verify(const PagePool& pool, std::span<const BlockTable* const> tables,
              std::span<Status> verdicts) override;
  void verify_batch(const PagePool& pool, std::span<const BlockTable* const> tables,
                    std::span<const IntegrityOverride> overrides, std::span<Status> verdicts) override;
  bool active() const override { return policy().mode != KvIntegrityMode::kOff; }
  std::optional<KvIntegrityPolicy> policy_for_followers() const override { return policy(); }

  // Engine thread: batches seen, batches (or forced requests) checked, pages compared.
  int64_t num_batches() const { return num_batches_; }
  int64_t num_checked_batches() const { return num_checked_batches_; }
  int64_t num_checked_pages() const { return num_checked_pages_; }

 private:
  std::atomic<uint64_t> policy_bits_;
  int64_t num_batches_ = 0;
  int64_t num_checked_batches_ = 0;
  int64_t num_digest_batches_ = 0;
  int64_t num_checked_pages_ = 0;
  PageDigests digests_;
  // Reused between batches.
  std::vector<int32_t> flat_pages_;    // [num_entries] pages of the checked tables, concatenated
  std::vector<uint32_t> flat_tags_;    // [num_entries] their expected tags
  std::vector<uint8_t> checked_;       // [num_seqs] 1 when the request is checked this batch
  std::vector<IntegrityOverride> default_overrides_;  // [num_seqs] for verify()
};

// The vectorized pass: the first i with tags[pages[i]] != expected[i], or pages.size().
// Precondition: every pages[i] indexes `tags`.
size_t find_tag_mismatch(const uint32_t* tags, std::span<const int32_t> pages, std::span<const uint32_t> expected);
// Its naive twin (the test oracle).
size_t find_tag_mismatch_reference(const uint32_t* tags, std::span<const int32_t> pages,
                                   std::span<const uint32_t> expected);

}  // namespace densa
