#include "kv/page_pool.h"

#include <string>
#include <utility>

namespace densa {
namespace {

// A bijection on 32 bits (the murmur3 finalizer): distinct counters give distinct tags, and
// neighbouring counters give unrelated-looking tags.
uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

}  // namespace

Result<PagePool> PagePool::create(const KvLayout& layout, int64_t budget_bytes) {
  const int64_t page_bytes = layout.page_bytes();
  if (page_bytes <= 0) return invalid_argument("KV layout has an empty page");
  const int64_t num_pages = budget_bytes > 0 ? budget_bytes / page_bytes : 0;
  if (num_pages < 1) {
    return resource_exhausted("KV budget of " + std::to_string(budget_bytes) +
                              " bytes holds no page of " + std::to_string(page_bytes) + " bytes");
  }
  if (num_pages > INT32_MAX) {
    return out_of_range("KV budget holds " + std::to_string(num_pages) +
                        " pages; page ids are 32-bit");
  }
  HugePages bytes = HugePages::map(static_cast<size_t>(num_pages * page_bytes));
  if (bytes.data() == nullptr) {
    return resource_exhausted("cannot reserve " + std::to_string(num_pages * page_bytes) + " bytes of KV cache");
  }
  return PagePool(layout, static_cast<int32_t>(num_pages), std::move(bytes));
}

PagePool::PagePool(const KvLayout& layout, int32_t num_pages, HugePages bytes)
    : layout_(layout),
      page_bytes_(layout.page_bytes()),
      num_pages_(num_pages),
      bytes_(std::move(bytes)),
      refcounts_(num_pages, 0),
      tags_(num_pages, 0),
      held_by_cache_(num_pages, 0),
      on_free_list_(num_pages, 1),
      history_(num_pages) {
  // Stack order: page 0 is handed out first.
  free_list_.reserve(num_pages);
  for (int32_t p = num_pages - 1; p >= 0; --p) free_list_.push_back(PageId(p));
}

uint32_t PagePool::next_tag() {
  ++alloc_counter_;
  // Skip counters whose low 32 bits are 0, so tag 0 keeps meaning "never allocated".
  if (static_cast<uint32_t>(alloc_counter_) == 0) ++alloc_counter_;
  return mix32(static_cast<uint32_t>(alloc_counter_));
}

std::optional<PageId> PagePool::allocate() {
  if (free_list_.empty()) return std::nullopt;
  const PageId page = free_list_.back();
  free_list_.pop_back();
  const size_t i = index(page);
  DCHECK(on_free_list_[i] && refcounts_[i] == 0 && !held_by_cache_[i]) << "free list holds busy page " << page.value;
  on_free_list_[i] = 0;
  refcounts_[i] = 1;
  tags_[i] = next_tag();
  ++num_used_;
  history_.record(page, PageEvent::kAllocate, tags_[i]);
  return page;
}

bool PagePool::allocate_into(int32_t num_pages, BlockTable& table) {
  DCHECK(num_pages >= 0) << "allocate_into " << num_pages;
  if (num_pages > num_free()) return false;
  table.pages.reserve(table.pages.size() + num_pages);
  table.tags.reserve(table.tags.size() + num_pages);
  for (int32_t k = 0; k < num_pages; ++k) {
    const PageId page = *allocate();
    table.append(page, tag(page));
  }
  return true;
}

PageState PagePool::state(PageId page) const {
  const size_t i = index(page);
  if (refcounts_[i] > 0) return PageState::kInUse;
  return held_by_cache_[i] ? PageState::kCached : PageState::kFree;
}

void PagePool::retain(PageId page) {
  const size_t i = index(page);
  CHECK(!on_free_list_[i]) << "retain of free page " << page.value;
  if (refcounts_[i] == 0) {
    // Precondition above: a page off the free list with refcount 0 is cached.
    DCHECK(held_by_cache_[i]) << "page " << page.value << " off the free list with refcount 0";
    --num_cached_;
    ++num_used_;
  }
  ++refcounts_[i];
}

void PagePool::release(PageId page) {
  const size_t i = index(page);
  CHECK(refcounts_[i] > 0) << "release of page " << page.value << " with refcount 0";
  if (--refcounts_[i] > 0) return;
  --num_used_;
  if (held_by_cache_[i]) {
    ++num_cached_;
    history_.record(page, PageEvent::kPark, tags_[i]);
  } else {
    on_free_list_[i] = 1;
    free_list_.push_back(page);
    history_.record(page, PageEvent::kFree, tags_[i]);
  }
}

void PagePool::retain_all(std::span<const PageId> pages) {
  for (PageId p : pages) retain(p);
}

void PagePool::release_all(std::span<const PageId> pages) {
  for (PageId p : pages) release(p);
}

void PagePool::mark_cached(PageId page) {
  const size_t i = index(page);
  CHECK(!on_free_list_[i]) << "mark_cached of free page " << page.value;
  CHECK(!held_by_cache_[i]) << "page " << page.value << " already held by the cache";
  // Off the free list and not held means refcount > 0: the page stays in use.
  held_by_cache_[i] = 1;
  history_.record(page, PageEvent::kCache, tags_[i]);
}

void PagePool::uncache(PageId page) {
  const size_t i = index(page);
  CHECK(held_by_cache_[i]) << "uncache of page " << page.value << " not held by the cache";
  held_by_cache_[i] = 0;
  history_.record(page, PageEvent::kUncache, tags_[i]);
  if (refcounts_[i] == 0) {
    --num_cached_;
    on_free_list_[i] = 1;
    free_list_.push_back(page);
  }
}

}  // namespace densa
