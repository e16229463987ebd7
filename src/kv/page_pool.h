#pragma once
// PagePool: owns every KV byte of the process. All pages are reserved at construction from a
// byte budget and the pool never grows. Each page is in exactly one state:
//   free    on the free list, refcount 0, not held by the prefix cache
//   in use  refcount > 0 (requests referencing it; it may also be held by the prefix cache)
//   cached  refcount 0 but held by the prefix cache (reusable, evictable)
// Every allocation gives the page a fresh 32-bit tag (a bijective mix of a global allocation
// counter, so a page never sees the same tag twice within 2^32 allocations; 0 = never
// allocated). Running out of pages is a scheduling outcome: allocate returns nullopt / false.
// The pool never evicts on its own; the prefix cache decides and calls uncache().
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/huge_page_arena.h"
#include "core/ids.h"
#include "core/status.h"
#include "kernels/kv_view.h"
#include "kv/block_table.h"
#include "kv/page_history.h"

namespace densa {

enum class PageState : uint8_t { kFree, kInUse, kCached };

class PagePool {
 public:
  static constexpr size_t kAlignBytes = 64;

  // Reserves floor(budget_bytes / layout.page_bytes()) pages in anonymous memory aligned to
  // 2 MiB and marked MADV_HUGEPAGE. Decode attention reads a few KiB of each KV page per layer,
  // pages far apart, so with 4 KiB pages nearly every read of a row block is a TLB miss
  // (doubly costly under nested paging); transparent huge pages, where the system allows them,
  // make that one miss per 2 MiB. Fails when the budget holds no page or the memory cannot be
  // reserved.
  static Result<PagePool> create(const KvLayout& layout, int64_t budget_bytes);

  PagePool(PagePool&&) noexcept = default;
  PagePool& operator=(PagePool&&) noexcept = default;

  // ---- lifetime ----
  // A free page with refcount 1 and a new tag, or nullopt when the free list is empty.
  std::optional<PageId> allocate();
  // All-or-nothing: appends `num_pages` fresh (page, tag) pairs to `table`, or returns false
  // and changes nothing.
  bool allocate_into(int32_t num_pages, BlockTable& table);
  // Precondition: page is in use or cached (a cached page becomes in use again).
  void retain(PageId page);
  // Precondition: refcount > 0. At 0 the page becomes cached if the prefix cache holds it,
  // free otherwise.
  void release(PageId page);
  void retain_all(std::span<const PageId> pages);
  void release_all(std::span<const PageId> pages);
  // The prefix cache takes / drops its hold. mark_cached precondition: page not free and
  // not already held. uncache precondition: held; a held page with refcount 0 becomes free.
  void mark_cached(PageId page);
  void uncache(PageId page);

  // ---- inspection ----
  uint32_t tag(PageId page) const { return tags_[index(page)]; }
  // A follower rank of a tensor / expert parallel group: its pool allocates nothing (the
  // leader's does, for every rank) and takes the leader's tag and reference count for `page`
  // before its own integrity check, whose digests then cover this rank's bytes
  // (exec/runner.h). The free list and the counts of used pages are left as they are.
  void mirror_page(PageId page, uint32_t tag, int32_t refcount) {
    tags_[index(page)] = tag;
    refcounts_[index(page)] = refcount;
  }
  const uint32_t* tags_data() const { return tags_.data(); }  // [num_total]
  int32_t refcount(PageId page) const { return refcounts_[index(page)]; }
  bool held_by_cache(PageId page) const { return held_by_cache_[index(page)] != 0; }
  bool on_free_list(PageId page) const { return on_free_list_[index(page)] != 0; }
  PageState state(PageId page) const;
  std::span<const PageId> free_list() const { return free_list_; }

  int32_t num_total() const { return num_pages_; }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_used() const { return num_used_; }
  int32_t num_cached() const { return num_cached_; }
  uint64_t num_allocations() const { return alloc_counter_; }
  // Recent lifetime events of each page (for integrity reports); set_step stamps later ones.
  const PageHistory& history() const { return history_; }
  void set_step(int64_t step) { history_.set_step(step); }

  // ---- bytes ----
  const KvLayout& layout() const { return layout_; }
  int64_t page_bytes() const { return page_bytes_; }
  // KvView::pool: page p starts at base() + p * page_bytes().
  uint8_t* base() { return bytes_.data(); }
  const uint8_t* base() const { return bytes_.data(); }
  uint8_t* page_data(PageId page) { return base() + static_cast<int64_t>(index(page)) * page_bytes_; }
  const uint8_t* page_data(PageId page) const {
    return base() + static_cast<int64_t>(index(page)) * page_bytes_;
  }

 private:
  PagePool(const KvLayout& layout, int32_t num_pages, HugePages bytes);
  size_t index(PageId page) const {
    DCHECK(page.value >= 0 && page.value < num_pages_) << "page " << page.value << " out of range";
    return static_cast<size_t>(page.value);
  }
  uint32_t next_tag();

  KvLayout layout_;
  int64_t page_bytes_ = 0;
  int32_t num_pages_ = 0;
  HugePages bytes_;  // [num_pages * page_bytes], 2 MiB-aligned
  std::vector<PageId> free_list_;                   // LIFO stack of free pages
  std::vector<int32_t> refcounts_;                  // [num_pages]
  std::vector<uint32_t> tags_;                      // [num_pages]
  std::vector<uint8_t> held_by_cache_;              // [num_pages] 0/1
  std::vector<uint8_t> on_free_list_;               // [num_pages] 0/1
  int32_t num_used_ = 0;    // pages with refcount > 0
  int32_t num_cached_ = 0;  // pages with refcount 0 held by the cache
  uint64_t alloc_counter_ = 0;
  PageHistory history_;  // [num_pages] rings of recent events
};

}  // namespace densa
