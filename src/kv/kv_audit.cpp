#include "kv/kv_audit.h"

#include <string>
#include <vector>

namespace densa {
namespace {

Status fail(const std::string& what) { return internal_error("kv_audit: " + what); }

std::string page_str(PageId p) { return "page " + std::to_string(p.value); }

}  // namespace

Status kv_audit(const PagePool& pool, std::span<const BlockTable* const> live_tables,
                std::span<const PageId> cache_pages) {
  const int32_t n = pool.num_total();
  const int32_t page_size = pool.layout().page_size;

  // Free list: in range, unique, agrees with the per-page flag.
  std::vector<uint8_t> seen_free(n, 0);
  for (PageId p : pool.free_list()) {
    if (p.value < 0 || p.value >= n) return fail("free list holds out-of-range " + page_str(p));
    if (seen_free[p.value]) return fail(page_str(p) + " is on the free list twice");
    seen_free[p.value] = 1;
  }

  // References from live tables.
  std::vector<int32_t> refs(n, 0);
  for (size_t t = 0; t < live_tables.size(); ++t) {
    const BlockTable& table = *live_tables[t];
    const std::string who = "table " + std::to_string(t);
    if (table.pages.size() != table.tags.size()) {
      return fail(who + " has " + std::to_string(table.pages.size()) + " pages but " +
                  std::to_string(table.tags.size()) + " tags");
    }
    if (table.num_tokens < 0 || table.num_tokens > table.capacity_tokens(page_size)) {
      return fail(who + " holds " + std::to_string(table.num_tokens) + " tokens in " +
                  std::to_string(table.num_pages()) + " pages");
    }
    for (size_t k = 0; k < table.pages.size(); ++k) {
      const PageId p = table.pages[k];
      if (p.value < 0 || p.value >= n) return fail(who + " references out-of-range " + page_str(p));
      ++refs[p.value];
      if (pool.tag(p) != table.tags[k]) {
        return fail(who + " expects tag " + std::to_string(table.tags[k]) + " for " +
                    page_str(p) + " but the pool has tag " + std::to_string(pool.tag(p)) +
                    " (page was reallocated)");
      }
    }
  }

  std::vector<uint8_t> in_cache(n, 0);
  for (PageId p : cache_pages) {
    if (p.value < 0 || p.value >= n) return fail("cache holds out-of-range " + page_str(p));
    if (in_cache[p.value]) return fail("cache lists " + page_str(p) + " twice");
    in_cache[p.value] = 1;
  }

  int32_t num_free = 0, num_used = 0, num_cached = 0;
  for (int32_t i = 0; i < n; ++i) {
    const PageId p(i);
    const int32_t rc = pool.refcount(p);
    const bool held = pool.held_by_cache(p);
    const bool free_flag = pool.on_free_list(p);
    if (free_flag != static_cast<bool>(seen_free[i])) {
      return fail(page_str(p) + (free_flag ? " is flagged free but not on the free list"
                                           : " is on the free list but not flagged free"));
    }
    if (rc != refs[i]) {
      return fail(page_str(p) + " has refcount " + std::to_string(rc) + " but " +
                  std::to_string(refs[i]) + " table references");
    }
    if (held != static_cast<bool>(in_cache[i])) {
      return fail(page_str(p) + (held ? " is held by the cache but not in the cache's set"
                                      : " is in the cache's set but not held by the cache"));
    }
    if (free_flag && (rc > 0 || held)) {
      return fail(page_str(p) + " is both free and referenced");
    }
    if (rc < 0) return fail(page_str(p) + " has a negative refcount");
    if (rc > 0) {
      ++num_used;
    } else if (held) {
      ++num_cached;
    } else {
      if (!free_flag) return fail(page_str(p) + " is unreferenced but not free (leaked)");
      ++num_free;
    }
  }
  if (num_free + num_used + num_cached != n) return fail("page states do not sum to total");
  if (num_free != pool.num_free() || num_used != pool.num_used() ||
      num_cached != pool.num_cached()) {
    return fail("counters free/used/cached " + std::to_string(pool.num_free()) + "/" +
                std::to_string(pool.num_used()) + "/" + std::to_string(pool.num_cached()) +
                " but recount gives " + std::to_string(num_free) + "/" +
                std::to_string(num_used) + "/" + std::to_string(num_cached));
  }
  return Status::ok();
}

}  // namespace densa
