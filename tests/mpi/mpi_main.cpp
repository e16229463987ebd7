// main() of densa_mpi_tests: MPI's world first (comm/mpi_communicator.h), then GoogleTest.
// Every rank runs every test, in the same order: a test is one SPMD program whose rank 0
// asserts while the other ranks do their part of each collective. Only rank 0 prints.
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/mpi_communicator.h"
#include "mpi_test_util.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = densa::mpi_world(120000);
  if (!world.is_ok()) {
    std::fprintf(stderr, "densa_mpi_tests: %s\n", world.status().to_string().c_str());
    return 1;
  }
  densa::testing::set_world(world.value().get());
  if ((*world)->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  densa::testing::set_world(nullptr);
  return rc;
}
