#pragma once
// --tp / --ep / --comm-timeout-ms for the commands that can run one model over an MPI job
// (`mpirun -n N densa serve ... --tp T --ep E`, N = T x E): the world communicator, this
// rank's layout and its tensor-parallel sub-group.
#include <memory>

#include <CLI/CLI.hpp>

#include "comm/communicator.h"
#include "core/status.h"

namespace densa::cli {

struct ParallelArgs {
  int tp = 1;
  int ep = 1;
  int comm_timeout_ms = 60000;
};

void add_parallel_options(CLI::App* cmd, ParallelArgs& args);

// The communicators of one rank; comms.world is null for a single process.
struct ParallelSetup {
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> tp;
  ParallelComms comms;
  bool active() const { return comms.world != nullptr; }
  bool leader() const { return comms.leader(); }
};

// Initialises MPI when --tp x --ep > 1 or the process was started by mpirun, and checks the
// job has exactly tp x ep ranks (a job of several ranks without --tp / --ep is refused: every
// rank would serve alone).
Result<std::unique_ptr<ParallelSetup>> setup_parallel(const ParallelArgs& args);

}  // namespace densa::cli
