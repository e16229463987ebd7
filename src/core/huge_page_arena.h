#pragma once
// A bump allocator over anonymous memory mapped in 2 MiB-aligned chunks and marked
// MADV_HUGEPAGE, for large long-lived buffers that are streamed every step (weights converted
// at load). Decode reads ~all weight bytes per token, so with 4 KiB pages every 4 KiB of a
// stream is a TLB miss (doubly costly under a hypervisor's nested paging); transparent huge
// pages cut that 512-fold where the kernel allows them (THP "madvise" or "always"), and
// without THP this is plain anonymous memory. Memory is zeroed (fresh mappings), never freed
// before the arena, and blocks are 64-byte aligned. Not thread-safe.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace densa {

// Anonymous memory of at least `bytes`, in whole 2 MiB pages from a 2 MiB boundary, marked
// MADV_HUGEPAGE (advisory: without THP these are ordinary pages), zeroed, and unmapped when
// destroyed. The mapping carries one huge page of slack to align within (never touched). The one
// place that maps memory this way: the weight arena's chunks, the KV page pool, and the benches
// that mimic them.
class HugePages {
 public:
  // Empty (data() null) when the system cannot map it. noreserve: MAP_NORESERVE, for address
  // space reserved ahead of use.
  static HugePages map(size_t bytes, bool noreserve = false);

  HugePages() = default;
  ~HugePages();
  HugePages(HugePages&& o) noexcept;
  HugePages& operator=(HugePages&& o) noexcept;
  HugePages(const HugePages&) = delete;
  HugePages& operator=(const HugePages&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }  // usable bytes from data()
  // Whether p lies in the mapping (slack included).
  bool contains(const void* p) const;

 private:
  void* base_ = nullptr;  // as mmap returned it
  size_t length_ = 0;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// The system's transparent huge page mode ("always", "madvise", "never"), or "unknown" where
// /sys/kernel/mm/transparent_hugepage/enabled cannot be read.
std::string transparent_huge_pages_mode();

class HugePageArena {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kChunk = size_t{64} << 20;  // address space reserved per chunk (touched on use)

  HugePageArena() = default;
  ~HugePageArena();
  HugePageArena(HugePageArena&& o) noexcept;
  HugePageArena& operator=(HugePageArena&& o) noexcept;
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // `bytes` of zeroed memory, 64-byte aligned. Aborts if the system has no memory to map.
  uint8_t* alloc(size_t bytes);
  // Bytes handed out so far (the sum of requests rounded to 64).
  size_t allocated() const { return allocated_; }
  // Whether p lies in memory this arena mapped.
  bool contains(const void* p) const;

 private:
  std::vector<HugePages> chunks_;
  uint8_t* next_ = nullptr;  // within the newest chunk
  uint8_t* end_ = nullptr;
  size_t allocated_ = 0;
};

}  // namespace densa
