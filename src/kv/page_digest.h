#pragma once
// Page digests: an xxHash3-64 of a page's bytes, taken once the page is full (its KV is never
// written again) and kept per page under the tag it was taken with, so a reallocated page
// starts over. Re-hashing later and comparing catches what tags cannot: stray writes into a
// live page and bit flips. page_digest() is also what a KV transfer carries per page.
#include <cstdint>
#include <vector>

#include "core/ids.h"
#include "kv/page_pool.h"

namespace densa {

// xxHash3-64 of all page_bytes() bytes of `page`.
uint64_t page_digest(const PagePool& pool, PageId page);

// Outcome of PageDigests::check for one full page.
struct DigestCheck {
  bool recorded = false;  // first sight under this tag: digest taken now, nothing compared
  bool match = true;      // compared and equal (or recorded)
  uint64_t expected = 0;
  uint64_t found = 0;
};

class PageDigests {
 public:
  // Sizes the store for `num_pages` pages (on first use; no-op when already that size).
  void reserve(int32_t num_pages);
  // Precondition: `page` is full and `tag` is its current tag. Records the digest when none
  // is kept for (page, tag); otherwise re-hashes and compares when `compare`.
  DigestCheck check(const PagePool& pool, PageId page, uint32_t tag, bool compare);

 private:
  std::vector<uint32_t> tags_;     // [num_pages] tag the digest was taken under; 0 = none
  std::vector<uint64_t> digests_;  // [num_pages]
};

}  // namespace densa
