// `densa --version` (see version.h). DENSA_VERSION and DENSA_GIT_COMMIT come from the header
// the build writes (cmake/densa_version.cmake).
#include "cli/version.h"

#include <fstream>
#include <string>

#include "core/cpu_features.h"
#include "densa_version.h"
#include "kernels/internal/attention_isa.h"
#include "kernels/matmul.h"

namespace densa::cli {
namespace {

// The "model name" line of /proc/cpuinfo, or "unknown CPU".
std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "unknown CPU" : line.substr(start);
  }
  return "unknown CPU";
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

std::string amx_line() {
  std::string s = "amx: bf16 ";
  s += yes_no(cpu_has_amx_bf16());
  s += ", int8 ";
  s += yes_no(cpu_has_amx_int8());
  s += cpu_use_amx() ? " (in use)" : cpu_has_amx_bf16() ? " (off: DENSA_AMX=0)" : "";
  return s;
}

std::string kernels_lines() {
  const bool avx512 = cpu_isa() == CpuIsa::kAvx512Bf16;
  std::string s = "kernels:\n";
  s += "  bf16 / f16 weights: ";
  s += matmul_bf16_on_amx() ? "AMX tiles, x rounded to bf16 (--bf16-activations f32: exact fp32 FMAs)"
                            : "fp32 activations, exact products";
  s += "\n  fp8 weights: ";
  s += matmul_fp8_on_amx() ? "AMX tiles, x rounded to bf16" : avx512 ? "AVX-512 vdpbf16ps, x rounded to bf16" : "exact fallback";
  // INT8, INT4 g32 and the GGUF affine rows share the 16-row tile kernels' units.
  const bool avx2 = cpu_isa() == CpuIsa::kAvx2;
  const bool tiles16 = matmul_prefers_int8_tiles() && (avx512 || avx2);
  const std::string tiles16_units =
      avx2 ? std::string("exact group sums, x as int8; AVX2 vpmaddubsw")
           : std::string("exact group sums, x as int8; GEMV on AVX-512 VNNI, GEMM on ") +
                 (cpu_use_amx() && cpu_has_amx_int8() ? "AMX-INT8" : "AVX-512 VNNI");
  s += "\n  int8 / q8_0 weights: ";
  s += tiles16  ? "16-row tiles, " + tiles16_units
       : avx512 ? "row-major, AVX-512 VNNI, x as int8"
                : "exact fallback";
  s += "\n  gguf k-quant / iq4 / mxfp4 weights: ";
  s += matmul_prefers_affine_tiles() && (avx512 || avx2) ? "affine rows in 16-row tiles, " + tiles16_units
       : avx512                                ? "affine rows, AVX-512 VNNI, x as int8"
                                               : "exact fallback (the file's values)";
  s += "\n  int4 / q4_0 weights: ";
  if (avx512 || avx2) {
    switch (matmul_int4_layout()) {
      case WeightLayout::kInt4Tiles16: s += "16-row tiles, " + tiles16_units; break;
      case WeightLayout::kInt4Tiles8: s += "8-row tiles, AVX-512 VNNI, x as int8"; break;
      default: s += avx512 ? "row-major, AVX-512 VNNI, x as int8" : "exact fallback"; break;
    }
  } else {
    s += "exact fallback";
  }
  s += "\n  paged attention: ";
  switch (attention_internal::attention_default_path()) {
    case attention_internal::AttnPath::kAmx: s += "AMX tiles (BF16 / FP8 pages, head_dim % 32 == 0), else AVX-512"; break;
    case attention_internal::AttnPath::kAvx512: s += "AVX-512"; break;
    case attention_internal::AttnPath::kAvx2: s += "AVX2"; break;
    case attention_internal::AttnPath::kScalar: s += "scalar"; break;
  }
  s += "\n";
  return s;
}

}  // namespace

std::string version_text() {
  std::string s = "densa " DENSA_VERSION " (commit " DENSA_GIT_COMMIT ")\n";
  s += "cpu: " + cpu_model_name() + "\n";
  s += "isa: " + std::string(cpu_isa_name(cpu_isa())) + " (hardware: " +
       std::string(cpu_isa_name(cpu_isa_hardware())) + "; DENSA_ISA caps it)\n";
  s += amx_line() + "\n";
  s += kernels_lines();
  s.pop_back();  // the caller ends the last line
  return s;
}

}  // namespace densa::cli
