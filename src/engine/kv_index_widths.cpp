#include "engine/kv_index_widths.h"

#include <limits>
#include <string>

namespace densa {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

Status overflow(const std::string& index, const std::string& type, __int128 largest, int64_t limit,
                const std::string& how) {
  // __int128 has no std::to_string; the values here fit in an unsigned 128-bit decimal.
  std::string digits;
  unsigned __int128 v = largest < 0 ? 0 : static_cast<unsigned __int128>(largest);
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return out_of_range(index + " would reach " + digits + ", past the " + std::to_string(limit) + " a " + type +
                      " holds (" + how + "); use a smaller KV pool, page count or batch");
}

}  // namespace

Status check_kv_index_widths(const KvLayout& layout, const KvIndexBounds& b) {
  const __int128 pages = b.num_pages;
  const __int128 page_bytes = layout.page_bytes();
  const __int128 page_size = layout.page_size;
  if (pages - 1 > kInt32Max)
    return overflow("the largest KV page id", "int32", pages - 1, kInt32Max,
                    std::to_string(b.num_pages) + " pages of " + std::to_string(layout.page_bytes()) + " bytes");
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  if (pages * page_bytes - 1 > kInt64Max)
    return overflow("the KV pool's largest byte offset", "int64", pages * page_bytes - 1, kInt64Max,
                    std::to_string(b.num_pages) + " pages x " + std::to_string(layout.page_bytes()) + " bytes");
  // A request's pages cover its tokens rounded up to a page; its slots count in int32.
  const __int128 request_pages = (static_cast<__int128>(b.max_request_tokens) + page_size - 1) / page_size;
  if (request_pages * page_size > kInt32Max)
    return overflow("a request's KV token slots", "int32", request_pages * page_size, kInt32Max,
                    std::to_string(b.max_request_tokens) + " tokens in pages of " + std::to_string(layout.page_size));
  // Every sequence of a batch appends its whole block table (shared prefix pages included).
  const __int128 batch_entries = request_pages * b.max_running_requests;
  if (batch_entries > kInt32Max)
    return overflow("a batch's block-table offset", "int32", batch_entries, kInt32Max,
                    std::to_string(b.max_running_requests) + " requests x " +
                        std::to_string(static_cast<int64_t>(request_pages)) + " pages each");
  if (b.max_step_tokens > kInt32Max)
    return overflow("a batch's token row", "int32", b.max_step_tokens, kInt32Max, "the step token budget");
  return Status::ok();
}

}  // namespace densa
