#pragma once
// Communicator: the collectives a model split across processes needs, and nothing else. The
// engine and the forward pass see only this interface; comm/mpi_communicator.h puts Open MPI
// behind it, and a GPU backend can put NCCL behind it without touching the callers.
//
// Determinism is part of the contract: all_reduce_sum gathers every rank's buffer and adds
// them in rank order ((r0 + r1) + r2 ...), the same bits on every rank, whatever algorithm
// the transport would use for a reduction. A request's output is then identical run to run
// and batch to batch at a given layout.
//
// Failure is fatal to the group: a collective that fails or outlives the communicator's
// timeout ends every process of the group (MPI_Abort), after printing which operation on which
// rank gave up. Nothing is computed or served from a group with a missing member.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace densa {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank within the whole job (for messages that name a rank).
  virtual int world_rank() const = 0;

  // data[0, n) on every rank becomes the sum over ranks, added in rank order. n is the same
  // on every rank.
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  // How all_reduce_sum moves the partials; every algorithm adds them in rank order, so the
  // result is the same bits whichever runs. kGather: every rank gathers every rank's whole
  // buffer and sums it all ((N - 1) n floats in per rank, one collective). kReduceScatter:
  // each rank gathers one 1/N slice of every buffer, sums it, then every rank gathers the
  // summed slices (2 (N - 1) / N n floats in per rank, two collectives). kAuto (the default)
  // picks by the group size (bench/allreduce_bench.cpp, docs/performance/parallel.md).
  enum class AllReduceAlgorithm { kAuto, kGather, kReduceScatter };
  virtual void set_all_reduce_algorithm(AllReduceAlgorithm algorithm) {}
  // `root`'s bytes reach every rank (*bytes resized there). With `wait_forever` the receivers
  // wait without the timeout: a follower idles there while the server has no work.
  virtual void broadcast(std::vector<uint8_t>* bytes, int root, bool wait_forever = false) = 0;
  // Every rank's `values` (the same count on every rank), concatenated in rank order.
  virtual std::vector<int64_t> all_gather(const std::vector<int64_t>& values) = 0;
  // Every rank's value, in rank order.
  std::vector<int64_t> all_gather(int64_t value) { return all_gather(std::vector<int64_t>{value}); }
  // The ranks that passed the same `color`, ordered by `key` then rank.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Prints `why` naming this rank and ends the whole group with a non-zero exit.
  [[noreturn]] virtual void abort_group(const std::string& why) = 0;
  // Wall time this rank has spent inside collectives on this communicator (waiting for the
  // slowest rank included; a follower's idle wait for the next batch excluded): the
  // communication share of a step, for benchmarks. Two clock reads per collective.
  virtual double busy_seconds() const = 0;
};

// How one model is laid out over the ranks of a job: world = tp x ep ranks. World rank r holds
// tensor-parallel slice tp_rank = r % tp of expert group ep_rank = r / tp. Attention and dense
// FFNs are split tp ways and replicated across expert groups; routed experts are split ep ways
// (each expert whole within one group, then split tp ways inside it).
struct ParallelLayout {
  int tp = 1;
  int ep = 1;
  int tp_rank = 0;
  int ep_rank = 0;

  int world() const { return tp * ep; }
  int world_rank() const { return ep_rank * tp + tp_rank; }
  bool active() const { return world() > 1; }
  static ParallelLayout of_rank(int tp, int ep, int world_rank) {
    return ParallelLayout{tp, ep, world_rank % tp, world_rank / tp};
  }
};

// The communicators one rank of a layout uses: `world` carries the step plan from rank 0 and
// the routed experts' sum; `tp` (the ranks of one expert group) the sums after attention and
// after a dense FFN. Not owned.
struct ParallelComms {
  ParallelLayout layout;
  Communicator* world = nullptr;
  Communicator* tp = nullptr;
  bool leader() const { return world == nullptr || world->rank() == 0; }
  // More than one rank: batches go to followers, products are summed over groups.
  bool spans_ranks() const { return world != nullptr && world->size() > 1; }
  // Rank 0's time inside collectives on both groups (Communicator::busy_seconds).
  double busy_seconds() const {
    return (world != nullptr ? world->busy_seconds() : 0.0) + (tp != nullptr ? tp->busy_seconds() : 0.0);
  }
};

}  // namespace densa
