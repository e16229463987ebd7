#pragma once
// This process's memory as the kernel counts it.
#include <cstdint>

namespace densa {

// Resident set size in bytes (/proc/self/statm); 0 where it cannot be read.
int64_t resident_bytes();

}  // namespace densa
