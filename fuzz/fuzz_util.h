#pragma once
// Helpers shared by the fuzz targets. FUZZ_ASSERT states an invariant the parser promises for
// input it accepted; a violation aborts like a sanitizer finding, so libFuzzer records it.
#include <cstdio>
#include <cstdlib>

#define FUZZ_ASSERT(cond)                                                                  \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
