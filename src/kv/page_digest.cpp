#include "kv/page_digest.h"

#include <xxhash.h>

namespace densa {

uint64_t page_digest(const PagePool& pool, PageId page) {
  return XXH3_64bits(pool.page_data(page), static_cast<size_t>(pool.page_bytes()));
}

void PageDigests::reserve(int32_t num_pages) {
  if (static_cast<int32_t>(tags_.size()) == num_pages) return;
  tags_.assign(static_cast<size_t>(num_pages), 0);
  digests_.assign(static_cast<size_t>(num_pages), 0);
}

DigestCheck PageDigests::check(const PagePool& pool, PageId page, uint32_t tag, bool compare) {
  const size_t i = static_cast<size_t>(page.value);
  DCHECK(i < tags_.size()) << "page " << page.value << " beyond the digest store";
  DigestCheck c;
  if (tags_[i] != tag) {
    tags_[i] = tag;
    digests_[i] = page_digest(pool, page);
    c.recorded = true;
    return c;
  }
  if (!compare) return c;
  c.expected = digests_[i];
  c.found = page_digest(pool, page);
  c.match = c.expected == c.found;
  return c;
}

}  // namespace densa
