#pragma once
// Open MPI behind comm/communicator.h. Collectives are MPI's non-blocking ones (MPI_Iallgather,
// MPI_Ibcast) polled against a deadline, so a rank that died or hangs turns into a named error
// within `timeout_ms` instead of a hang. MPI is initialised with MPI_THREAD_SERIALIZED: the
// leader calls from its engine thread, one call at a time.
#include <memory>

#include "comm/communicator.h"
#include "core/status.h"

namespace densa {

// MPI_COMM_WORLD, initialising MPI on first use (a process started without mpirun is a world
// of one). MPI is finalised when the process exits normally.
Result<std::unique_ptr<Communicator>> mpi_world(int timeout_ms);

// Whether this process was started by an MPI launcher (mpirun's environment), read without
// initialising MPI.
bool launched_by_mpi();

}  // namespace densa
