#include "core/cpu_features.h"

#include <cstdlib>
#include <string>

namespace densa {

CpuIsa cpu_isa_hardware() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") &&
      __builtin_cpu_supports("avx512vnni")) {
    return CpuIsa::kAvx512Bf16;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return CpuIsa::kAvx2;
  }
#endif
  return CpuIsa::kScalar;
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

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512Bf16: return "avx512_bf16";
  }
  return "?";
}

}  // namespace densa
