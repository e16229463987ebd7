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
  struct Chunk {
    void* base = nullptr;  // as mmap returned it
    size_t length = 0;
  };
  void release();
  std::vector<Chunk> chunks_;
  uint8_t* next_ = nullptr;  // within the newest chunk
  uint8_t* end_ = nullptr;
  size_t allocated_ = 0;
};

}  // namespace densa
