#pragma once
// kv_audit: a full consistency check of a PagePool against everyone who references it.
// Tests run it after every operation; the engine can run it when idle. O(pages + references).
#include <span>

#include "core/ids.h"
#include "core/status.h"
#include "kv/block_table.h"
#include "kv/page_pool.h"

namespace densa {

// Checks, returning kInternal with the first violation found:
//  - free + cached + in-use == total, and the pool's counters match a recount
//  - the free list holds each free page exactly once, and nothing else
//  - refcount(p) == number of references to p from `live_tables`
//  - held_by_cache(p) exactly for the pages in `cache_pages` (each listed once)
//  - no referenced or cache-held page is free
//  - every table entry's tag equals the pool's current tag of that page, tables have one tag
//    per page and at least ceil(num_tokens / page_size) pages
Status kv_audit(const PagePool& pool, std::span<const BlockTable* const> live_tables,
                std::span<const PageId> cache_pages);

}  // namespace densa
