#pragma once
// Runtime CPU dispatch: kernels pick an implementation by the ISA level found at start-up,
// so one binary runs on any x86-64. DENSA_ISA=scalar|avx2|avx512 caps the level (tests use
// it to exercise every path on one machine).
#include <string_view>

namespace densa {

enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx512Bf16 = 2 };

// Highest level this CPU supports (cached after the first call), capped by DENSA_ISA.
CpuIsa cpu_isa();
// Highest level the hardware supports, ignoring DENSA_ISA.
CpuIsa cpu_isa_hardware();
std::string_view cpu_isa_name(CpuIsa isa);

}  // namespace densa
