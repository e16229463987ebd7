#pragma once
// Memory one thread reuses from call to call: kernels take their scratch buffers here instead
// of allocating them per call (ThreadPool::scratch holds one per pool thread). A slot is one
// buffer, kept between calls and grown when a call needs more, so a warm thread allocates
// nothing. One thread uses a WorkerScratch at a time; callers give distinct slots to buffers
// that are live at the same time (kernels/internal/scratch_slots.h numbers the kernels').
#include <cstddef>
#include <cstdint>
#include <vector>

namespace densa {

class alignas(64) WorkerScratch {
 public:
  static constexpr int kSlots = 8;

  // At least `bytes` bytes, 64-byte aligned, in slot `slot` (0 <= slot < kSlots). Contents are
  // unspecified; the pointer stays valid until the slot is asked for more bytes.
  uint8_t* bytes(int slot, size_t bytes) {
    std::vector<uint8_t>& b = slots_[slot];
    if (b.size() < bytes + 64) b.resize(bytes + 64);
    const uintptr_t p = reinterpret_cast<uintptr_t>(b.data());
    return b.data() + ((64 - p % 64) % 64);
  }
  template <typename T>
  T* array(int slot, size_t n) {
    return reinterpret_cast<T*>(bytes(slot, n * sizeof(T)));
  }

 private:
  std::vector<uint8_t> slots_[kSlots];
};

}  // namespace densa
