#pragma once
// The world communicator of densa_mpi_tests (set by mpi_main.cpp).
#include "comm/communicator.h"

namespace densa::testing {

inline Communicator*& world_slot() {
  static Communicator* w = nullptr;
  return w;
}
inline void set_world(Communicator* w) { world_slot() = w; }
inline Communicator& world() { return *world_slot(); }

}  // namespace densa::testing
