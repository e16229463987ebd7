#pragma once
// PageHistory: the last few lifetime events of every page (allocate, free, cache, uncache,
// park) with the engine step and the page's tag at the time, so an integrity violation can say
// how a page got where it is. A fixed ring of kDepth records per page, reserved at
// construction: recording is one store, never an allocation.
#include <array>
#include <cstdint>
#include <vector>

#include "core/ids.h"

namespace densa {

enum class PageEvent : uint8_t {
  kNone,      // empty ring slot
  kAllocate,  // taken from the free list with a fresh tag
  kFree,      // refcount reached 0, back on the free list
  kPark,      // refcount reached 0 while held by the prefix cache
  kCache,     // the prefix cache took its hold
  kUncache,   // the prefix cache dropped its hold (eviction or erase)
};

const char* page_event_name(PageEvent event);

struct PageEventRecord {
  int64_t step = 0;   // engine step when it happened
  uint32_t tag = 0;   // page tag after the event
  PageEvent event = PageEvent::kNone;
};

class PageHistory {
 public:
  static constexpr int kDepth = 4;

  PageHistory() = default;
  explicit PageHistory(int32_t num_pages)
      : records_(static_cast<size_t>(num_pages) * kDepth), next_(static_cast<size_t>(num_pages), 0) {}

  // The step stamped on the events that follow (the engine sets it once per step).
  void set_step(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }

  void record(PageId page, PageEvent event, uint32_t tag) {
    const size_t p = static_cast<size_t>(page.value);
    uint8_t& n = next_[p];
    records_[p * kDepth + n] = PageEventRecord{step_, tag, event};
    n = static_cast<uint8_t>((n + 1) % kDepth);
  }

  // The page's recorded events, oldest first (at most kDepth).
  std::vector<PageEventRecord> events(PageId page) const {
    std::vector<PageEventRecord> out;
    const size_t p = static_cast<size_t>(page.value);
    for (int k = 0; k < kDepth; ++k) {
      const PageEventRecord& r = records_[p * kDepth + (next_[p] + k) % kDepth];
      if (r.event != PageEvent::kNone) out.push_back(r);
    }
    return out;
  }

 private:
  std::vector<PageEventRecord> records_;  // [num_pages * kDepth] one ring per page
  std::vector<uint8_t> next_;             // [num_pages] next ring slot to write
  int64_t step_ = 0;
};

inline const char* page_event_name(PageEvent event) {
  switch (event) {
    case PageEvent::kNone: return "none";
    case PageEvent::kAllocate: return "allocate";
    case PageEvent::kFree: return "free";
    case PageEvent::kPark: return "park";
    case PageEvent::kCache: return "cache";
    case PageEvent::kUncache: return "uncache";
  }
  return "?";
}

}  // namespace densa
