// The decode attention kernels' software prefetches survive compilation. GCC's pure-const pass
// takes a function whose only effects are __builtin_prefetch / _mm_prefetch for one with no side
// effects and deletes the calls to it, so a prefetch helper that is not inlined compiles to
// nothing. The attention kernels' helpers once were such functions, and every prefetch distance
// and hint measured then ran the same binary. This test reads the disassembly
// of the densa binary (objdump, from binutils, which the compiler needs anyway) and checks that
// each kernel body holds prefetch instructions.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace densa {
namespace {

// Prefetch instructions per function whose demangled name contains one of `names`.
std::map<std::string, int> prefetches_in(const std::string& binary, const std::vector<std::string>& names,
                                         std::string* error) {
  std::map<std::string, int> count;
  for (const std::string& n : names) count[n] = 0;
  const std::string cmd = "objdump -d --no-show-raw-insn -C '" + binary + "' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) {
    *error = "cannot run: " + cmd;
    return count;
  }
  std::string current;
  char buf[4096];
  int lines = 0;
  while (std::fgets(buf, sizeof buf, pipe.get()) != nullptr) {
    ++lines;
    const std::string line(buf);
    if (line.size() > 2 && line.find(">:") != std::string::npos && line[0] != ' ') {
      current.clear();
      for (const std::string& n : names)
        if (line.find(n) != std::string::npos) current = n;
      continue;
    }
    if (!current.empty() && line.find("prefetch") != std::string::npos) ++count[current];
  }
  if (lines < 1000) *error = "objdump printed " + std::to_string(lines) + " lines for " + binary;
  return count;
}

TEST(PrefetchCodegen, AttentionKernelsKeepTheirPrefetches) {
  // Demangled names (the AVX-512 / scalar tile loop, the AMX kernel, the layer-ahead prefetch).
  const std::vector<std::string> names = {"attention_internal::(anonymous namespace)::attend_run(",
                                          "attention_internal::attend_run_amx(", "densa::paged_attention_prefetch("};
  std::string error;
  const std::map<std::string, int> count = prefetches_in(DENSA_BINARY, names, &error);
  ASSERT_TRUE(error.empty()) << error;
  for (const std::string& n : names) EXPECT_GT(count.at(n), 0) << n << " has no prefetch instruction";
}

}  // namespace
}  // namespace densa
