#pragma once
// BlockTable: one request's view of its KV cache, the ordered (PageId, tag) pairs it expects
// plus how many token slots it has filled. The tag is the page's PagePool tag at the moment
// the request took the page; a later mismatch means the page was freed and reallocated
// under the request (see kv_audit and the integrity tracker).
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "core/ids.h"

namespace densa {

struct BlockTable {
  std::vector<PageId> pages;   // [num_pages] in token order: page i holds tokens [i*P, (i+1)*P)
  std::vector<uint32_t> tags;  // [num_pages] expected PagePool::tag of pages[i]
  int32_t num_tokens = 0;      // filled token slots; <= num_pages * page_size

  int32_t num_pages() const { return static_cast<int32_t>(pages.size()); }
  void append(PageId page, uint32_t tag) {
    pages.push_back(page);
    tags.push_back(tag);
  }
  // Token slots the table can hold without another page.
  int64_t capacity_tokens(int32_t page_size) const {
    return static_cast<int64_t>(pages.size()) * page_size;
  }
  // Pages still to allocate before the table holds `total_tokens` tokens.
  int32_t pages_missing(int64_t total_tokens, int32_t page_size) const {
    DCHECK(page_size > 0) << "page_size " << page_size;
    const int64_t needed = (total_tokens + page_size - 1) / page_size;
    return needed > num_pages() ? static_cast<int32_t>(needed - num_pages()) : 0;
  }
  void clear() {
    pages.clear();
    tags.clear();
    num_tokens = 0;
  }
};

// Pages needed to hold `num_tokens` tokens.
inline int64_t pages_for_tokens(int64_t num_tokens, int32_t page_size) {
  DCHECK(page_size > 0) << "page_size " << page_size;
  return (num_tokens + page_size - 1) / page_size;
}

}  // namespace densa
