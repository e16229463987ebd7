#include "core/huge_page_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "core/check.h"

namespace densa {

std::string transparent_huge_pages_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return "unknown";
  const size_t open = line.find('['), close = line.find(']');
  return open != std::string::npos && close != std::string::npos && close > open ? line.substr(open + 1, close - open - 1)
                                                                                 : "unknown";
}

HugePageArena::~HugePageArena() { release(); }

HugePageArena::HugePageArena(HugePageArena&& o) noexcept { *this = std::move(o); }

HugePageArena& HugePageArena::operator=(HugePageArena&& o) noexcept {
  if (this != &o) {
    release();
    chunks_ = std::exchange(o.chunks_, {});
    next_ = std::exchange(o.next_, nullptr);
    end_ = std::exchange(o.end_, nullptr);
    allocated_ = std::exchange(o.allocated_, 0);
  }
  return *this;
}

bool HugePageArena::contains(const void* p) const {
  const auto* b = static_cast<const uint8_t*>(p);
  for (const Chunk& c : chunks_) {
    const auto* lo = static_cast<const uint8_t*>(c.base);
    if (b >= lo && b < lo + c.length) return true;
  }
  return false;
}

void HugePageArena::release() {
  for (const Chunk& c : chunks_) munmap(c.base, c.length);
  chunks_.clear();
}

uint8_t* HugePageArena::alloc(size_t bytes) {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  if (next_ == nullptr || static_cast<size_t>(end_ - next_) < bytes) {
    // A new chunk: at least kChunk, whole huge pages, plus one huge page of slack to align to.
    const size_t usable = std::max(kChunk, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    const size_t length = usable + kHugePage;
    void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(base != MAP_FAILED) << "weight arena: cannot map " << length << " bytes";
    chunks_.push_back({base, length});
    const uintptr_t b = reinterpret_cast<uintptr_t>(base);
    next_ = reinterpret_cast<uint8_t*>((b + kHugePage - 1) / kHugePage * kHugePage);
    end_ = next_ + usable;
#ifdef MADV_HUGEPAGE
    madvise(next_, usable, MADV_HUGEPAGE);  // advisory: without THP the memory is ordinary pages
#endif
  }
  uint8_t* p = next_;
  next_ += bytes;
  allocated_ += bytes;
  return p;
}

}  // namespace densa
