#include "core/cpu_features.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace densa {
namespace {

// F16C from CPUID leaf 1 (ECX bit 29): Clang's __builtin_cpu_supports does not know "f16c"
// (GCC's does), and the fuzz builds are Clang.
bool cpu_has_f16c() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  return (c >> 29 & 1u) != 0;
#else
  return false;
#endif
}

CpuIsa detect_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") &&
      __builtin_cpu_supports("avx512vnni")) {
    return CpuIsa::kAvx512Bf16;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c()) {
    return CpuIsa::kAvx2;
  }
#endif
  return CpuIsa::kScalar;
}

}  // namespace

// Cached: the kernels' dispatch asks on every product, and CPUID (cpu_has_f16c) exits to the
// hypervisor in a VM.
CpuIsa cpu_isa_hardware() {
  static const CpuIsa isa = detect_isa();
  return isa;
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = [] {
    CpuIsa hw = cpu_isa_hardware();
    if (const char* cap = std::getenv("DENSA_ISA")) {
      const std::string c = cap;
      CpuIsa want = c == "scalar" ? CpuIsa::kScalar : c == "avx2" ? CpuIsa::kAvx2 : CpuIsa::kAvx512Bf16;
      if (static_cast<int>(want) < static_cast<int>(hw)) hw = want;
    }
    return hw;
  }();
  return isa;
}

bool cpu_has_amx_bf16() {
  static const bool ok = [] {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(1, 0, a, b, c, d);
    if ((c >> 27 & 1u) == 0) return false;  // OSXSAVE: xgetbv is usable
    __cpuid_count(7, 0, a, b, c, d);
    if ((d >> 22 & 1u) == 0 || (d >> 24 & 1u) == 0) return false;  // AMX-BF16, AMX-TILE
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const uint64_t xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
    constexpr uint64_t kTileState = (uint64_t{1} << 17) | (uint64_t{1} << 18);  // XTILECFG, XTILEDATA
    if ((xcr0 & kTileState) != kTileState) return false;
    // Linux hands out the 8 KiB of tile data per process on request (kernel 5.16+); a kernel
    // that does not know the request refuses it and the tiles stay off.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return ok;
}

bool cpu_has_amx_int8() {
  static const bool ok = [] {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 0, a, b, c, d);
    return (d >> 25 & 1u) != 0 && (d >> 24 & 1u) != 0;  // AMX-INT8, AMX-TILE
#else
    return false;
#endif
  }();
  return ok;
}

bool cpu_use_amx() {
  static const bool use = [] {
    const char* v = std::getenv("DENSA_AMX");
    if (v != nullptr && std::string(v) == "0") return false;
    return cpu_has_amx_bf16();
  }();
  return use;
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512Bf16: return "avx512_bf16";
  }
  return "?";
}

}  // namespace densa
