#pragma once
// `densa --version`: what this binary is and which kernels it will run on this machine.
#include <string>

namespace densa::cli {

// Several lines: "densa VERSION (commit COMMIT)", the CPU, the ISA level in force (after
// DENSA_ISA) and the hardware's, AMX and whether this process uses it (DENSA_AMX), then the
// kernel path each weight format and paged attention take here.
std::string version_text();

}  // namespace densa::cli
