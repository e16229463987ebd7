#include "core/process_memory.h"

#include <unistd.h>

#include <cstdio>

namespace densa {

int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long pages = 0, resident = 0;
  const int got = std::fscanf(f, "%lld %lld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? resident * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace densa
