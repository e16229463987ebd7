// HugePageArena (core/huge_page_arena.h): blocks are zeroed, 64-byte aligned, disjoint and
// inside the arena; a request larger than a chunk gets a chunk of its own; the arena's
// memory is marked MADV_HUGEPAGE (checked in /proc/self/smaps where the kernel reports it);
// a moved-from arena owns nothing.
#include "core/huge_page_arena.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace densa {
namespace {

TEST(HugePageArena, BlocksAreZeroedAlignedDisjointAndOwned) {
  HugePageArena arena;
  EXPECT_EQ(arena.allocated(), 0u);
  std::vector<std::pair<uint8_t*, size_t>> blocks;
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, size_t{3} << 20, HugePageArena::kChunk + 5, size_t{64}}) {
    uint8_t* p = arena.alloc(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    EXPECT_TRUE(arena.contains(p));
    EXPECT_TRUE(arena.contains(p + bytes - 1));
    for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(p[i], 0) << bytes;
    std::memset(p, 0xab, bytes);  // writable, and any overlap would show below
    blocks.push_back({p, bytes});
  }
  for (size_t a = 0; a < blocks.size(); ++a) {
    for (size_t b = a + 1; b < blocks.size(); ++b) {
      const bool apart = blocks[a].first + blocks[a].second <= blocks[b].first ||
                         blocks[b].first + blocks[b].second <= blocks[a].first;
      EXPECT_TRUE(apart) << a << " and " << b;
    }
  }
  EXPECT_GE(arena.allocated(), size_t{3} << 20);
  int stack = 0;
  EXPECT_FALSE(arena.contains(&stack));

  HugePageArena moved = std::move(arena);
  EXPECT_TRUE(moved.contains(blocks[0].first));
  EXPECT_FALSE(arena.contains(blocks[0].first));  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(arena.allocated(), 0u);               // NOLINT(bugprone-use-after-move)
}

// The chunk holding a block is advised for huge pages: /proc/self/smaps lists "hg" in the
// VmFlags of that mapping (kernels since 3.x report it; THP "never" still keeps the flag).
TEST(HugePageArena, MemoryIsAdvisedForHugePages) {
  const std::string mode = transparent_huge_pages_mode();
  ASSERT_TRUE(mode == "always" || mode == "madvise" || mode == "never" || mode == "unknown") << mode;
  if (mode == "unknown") GTEST_SKIP() << "this kernel has no transparent huge pages (no sysfs switch)";
  HugePageArena arena;
  uint8_t* p = arena.alloc(size_t{4} << 20);
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  ASSERT_TRUE(smaps) << "no /proc/self/smaps";
  std::string line;
  bool in_mapping = false, found = false, advised = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') != std::string::npos &&
        line.find('-') < line.find(' ')) {
      in_mapping = addr >= lo && addr < hi;
      found |= in_mapping;
      continue;
    }
    if (in_mapping && line.rfind("VmFlags:", 0) == 0) advised = line.find(" hg") != std::string::npos;
  }
  ASSERT_TRUE(found) << "block not in any mapping";
  EXPECT_TRUE(advised);
}

}  // namespace
}  // namespace densa
