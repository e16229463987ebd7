#pragma once
// The first 64-byte boundary at or after p: kernel scratch buffers are allocated 64 bytes over
// their need and start their vector loads and tiles there.
#include <cstdint>

namespace densa::kernels_internal {

inline uint8_t* align64(uint8_t* p) { return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64; }

}  // namespace densa::kernels_internal
