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

HugePages HugePages::map(size_t bytes, bool noreserve) {
  constexpr size_t kHuge = HugePageArena::kHugePage;
  HugePages h;
  const size_t usable = (bytes + kHuge - 1) / kHuge * kHuge;
  const size_t length = usable + kHuge;
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | (noreserve ? MAP_NORESERVE : 0), -1, 0);
  if (base == MAP_FAILED) return h;
  h.base_ = base;
  h.length_ = length;
  h.data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHuge - 1) / kHuge * kHuge);
  h.size_ = usable;
#ifdef MADV_HUGEPAGE
  madvise(h.data_, usable, MADV_HUGEPAGE);
#endif
  return h;
}

HugePages::~HugePages() {
  if (base_ != nullptr) munmap(base_, length_);
}

HugePages::HugePages(HugePages&& o) noexcept { *this = std::move(o); }

HugePages& HugePages::operator=(HugePages&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) munmap(base_, length_);
    base_ = std::exchange(o.base_, nullptr);
    length_ = std::exchange(o.length_, 0);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

bool HugePages::contains(const void* p) const {
  const auto* b = static_cast<const uint8_t*>(p);
  const auto* lo = static_cast<const uint8_t*>(base_);
  return base_ != nullptr && b >= lo && b < lo + length_;
}

HugePageArena::~HugePageArena() = default;

HugePageArena::HugePageArena(HugePageArena&& o) noexcept { *this = std::move(o); }

HugePageArena& HugePageArena::operator=(HugePageArena&& o) noexcept {
  if (this != &o) {
    chunks_ = std::exchange(o.chunks_, {});
    next_ = std::exchange(o.next_, nullptr);
    end_ = std::exchange(o.end_, nullptr);
    allocated_ = std::exchange(o.allocated_, 0);
  }
  return *this;
}

bool HugePageArena::contains(const void* p) const {
  for (const HugePages& c : chunks_)
    if (c.contains(p)) return true;
  return false;
}

uint8_t* HugePageArena::alloc(size_t bytes) {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  if (next_ == nullptr || static_cast<size_t>(end_ - next_) < bytes) {
    // A new chunk of at least kChunk, address space reserved ahead of use.
    HugePages chunk = HugePages::map(std::max(kChunk, bytes), /*noreserve=*/true);
    CHECK(chunk.data() != nullptr) << "weight arena: cannot map " << std::max(kChunk, bytes) << " bytes";
    next_ = chunk.data();
    end_ = next_ + chunk.size();
    chunks_.push_back(std::move(chunk));
  }
  uint8_t* p = next_;
  next_ += bytes;
  allocated_ += bytes;
  return p;
}

}  // namespace densa
