#include "cli/parallel_options.h"

#include "comm/mpi_communicator.h"

namespace densa::cli {

void add_parallel_options(CLI::App* cmd, ParallelArgs& args) {
  cmd->add_option("--tp", args.tp, "tensor-parallel ranks: attention heads and FFN widths split over them (under mpirun)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--ep", args.ep, "expert-parallel groups: routed experts split over them (under mpirun; ranks = tp x ep)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--comm-timeout-ms", args.comm_timeout_ms,
                  "a collective between ranks that takes longer ends the whole group, naming the rank that gave up")
      ->check(CLI::Range(1, 86400000))
      ->capture_default_str();
}

Result<std::unique_ptr<ParallelSetup>> setup_parallel(const ParallelArgs& args) {
  auto setup = std::make_unique<ParallelSetup>();
  const int want = args.tp * args.ep;
  if (want == 1 && !launched_by_mpi()) return setup;
  Result<std::unique_ptr<Communicator>> world = mpi_world(args.comm_timeout_ms);
  if (!world.is_ok()) return world.status();
  setup->world = std::move(world).value();
  const int ranks = setup->world->size();
  if (ranks != want) {
    return invalid_argument("--tp " + std::to_string(args.tp) + " x --ep " + std::to_string(args.ep) + " is " +
                            std::to_string(want) + " ranks, but this job has " + std::to_string(ranks) +
                            " (start it with mpirun -n " + std::to_string(want) + ")");
  }
  if (want == 1) {  // mpirun -n 1: one process, no group
    setup->world.reset();
    return setup;
  }
  const ParallelLayout layout = ParallelLayout::of_rank(args.tp, args.ep, setup->world->rank());
  setup->tp = setup->world->split(layout.ep_rank, layout.tp_rank);
  setup->comms = ParallelComms{layout, setup->world.get(), setup->tp.get()};
  return setup;
}

}  // namespace densa::cli
