#pragma once
// Runtime CPU dispatch: kernels pick an implementation by the ISA level found at start-up,
// so one binary runs on any x86-64. DENSA_ISA=scalar|avx2|avx512 caps the level (tests use
// it to exercise every path on one machine).
#include <string_view>

namespace densa {

enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx512Bf16 = 2 };

// Highest level this CPU supports (cached after the first call), capped by DENSA_ISA.
CpuIsa cpu_isa();
// Highest level the hardware supports, ignoring DENSA_ISA (cached after the first call).
CpuIsa cpu_isa_hardware();
std::string_view cpu_isa_name(CpuIsa isa);

// AMX with BF16 tiles (Sapphire Rapids and later): the CPU has AMX-TILE and AMX-BF16, the OS
// saves tile state (XCR0), and Linux granted this process the tile data (arch_prctl
// ARCH_REQ_XCOMP_PERM, requested on the first call; cached). Independent of CpuIsa: AMX is an
// addition to the AVX-512 level, used by the FP8 matmul (kernels/matmul/quant_*.cpp).
bool cpu_has_amx_bf16();
// cpu_has_amx_bf16() unless DENSA_AMX=0 turns AMX off for this process (read once).
bool cpu_use_amx();
// The CPU also has AMX-INT8 (tdpbssd and kin; Sapphire Rapids and later). Use only with
// cpu_use_amx(), which grants the tile state.
bool cpu_has_amx_int8();

}  // namespace densa
