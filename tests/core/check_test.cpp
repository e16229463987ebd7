// CHECK and DCHECK (core/check.h). Which DCHECK test exists depends on the build: without
// NDEBUG (CMAKE_BUILD_TYPE=Debug, what .ci/sanitize builds) DcheckDeathTest.FiresWithoutNdebug
// proves a DCHECK aborts with its condition and context; with NDEBUG (Release) the other test
// proves it compiles away without evaluating its condition. .ci/sanitize runs
// DcheckDeathTest.FiresWithoutNdebug by name with --no-tests=error, so a sanitizer build that
// lost its DCHECKs fails CI instead of passing quietly.
#include <gtest/gtest.h>

#include "core/check.h"

namespace densa {
namespace {

TEST(CheckDeathTest, FailureAbortsWithConditionAndContext) {
  const int pages = 3;
  EXPECT_DEATH(CHECK(pages == 4) << "pages " << pages, "CHECK failed: pages == 4 pages 3");
}

TEST(Check, PassingCheckEvaluatesItsConditionOnce) {
  int evaluated = 0;
  CHECK(++evaluated == 1) << "never printed";
  EXPECT_EQ(evaluated, 1);
}

#ifndef NDEBUG
TEST(DcheckDeathTest, FiresWithoutNdebug) {
  const int slot = 7;
  EXPECT_DEATH(DCHECK(slot < 4) << "slot " << slot, "CHECK failed: slot < 4 slot 7");
  int evaluated = 0;
  DCHECK(++evaluated == 1);
  EXPECT_EQ(evaluated, 1);
}
#else
TEST(Dcheck, CompiledOutUnderNdebug) {
  int evaluated = 0;
  DCHECK(++evaluated == 5) << "never printed";
  EXPECT_EQ(evaluated, 0);
}
#endif

}  // namespace
}  // namespace densa
