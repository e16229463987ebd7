#pragma once
// What the AMX kernels (FP8 matmul, attention) share: the tile configuration `ldtilecfg` reads
// and a compiler barrier between ordinary stores and the tile instructions that read them.
#include <cstdint>

namespace densa::kernels_internal {

inline constexpr int64_t kAmxTileBytes = 1024;  // a full tile: 16 rows x 64 bytes

// Palette 1: per tile register t, rows[t] rows of colsb[t] bytes (at most 16 x 64).
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  void set(int tile, int num_rows, int bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(num_rows);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
  }
};

}  // namespace densa::kernels_internal

// The compiler does not see the tile instructions touch memory: order the buffer stores before
// tile loads, and tile stores before the loads that read them.
#define DENSA_MEMORY_BARRIER() __asm__ volatile("" ::: "memory")
