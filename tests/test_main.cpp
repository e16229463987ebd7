// The test binary's main. ctest runs one test per process (gtest_discover_tests) and must tell a
// skipped test from a failed one by the exit code alone: CMake's default for discovered tests
// marks a test skipped when "[  SKIPPED ]" appears in its output, and gtest prints that for
// every test of a suite whose SetUpTestSuite failed (a server that never became ready), so
// such a failure counted as a skip and the run stayed green. Here a run exits 77 (ctest's
// SKIP_RETURN_CODE, CMakeLists.txt) only when nothing failed, nothing passed and a test
// skipped itself; any failure, a suite's set-up included, exits 1.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (rc == 0 && u.failed_test_count() == 0 && !u.ad_hoc_test_result().Failed() && u.successful_test_count() == 0 &&
      u.skipped_test_count() > 0) {
    return 77;
  }
  return rc;
}
