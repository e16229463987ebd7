#pragma once
// The WorkerScratch slots (core/worker_scratch.h) kernels keep their per-thread buffers in.
// Kernels take scratch from the pool they run in (ThreadPool::scratch of the thread running
// the work; pool null: a WorkerScratch of the call's own, allocated for that call). A thread
// runs one kernel at a time, so kernels share slot numbers; buffers that one kernel holds at
// the same time have distinct ones.
#include "core/thread_pool.h"
#include "core/worker_scratch.h"

namespace densa::kernels_internal {

// The scratch of a kernel's work run by thread `worker` of `pool`: that thread's, kept across
// calls (a warm pool allocates nothing); without a pool, `own`, the call's.
inline WorkerScratch& scratch_of(ThreadPool* pool, int worker, WorkerScratch& own) {
  return pool != nullptr ? pool->scratch(worker) : own;
}

enum ScratchSlot : int {
  // Quantized matmul (kernels/matmul/quant_*): one weight row tile decoded to bf16 (FP8 GEMM),
  // or the AMX kernels' A buffers, tables and C tiles.
  kSlotMatmulRows = 0,
  // Activation preparation for AMX tiles: one x row, and its single copy when F16 repeats it.
  kSlotPrepareRow = 1,
  kSlotPrepareOnce = 2,
  // matmul_many's buffers, on the calling thread (worker 0) and read by every worker while the
  // products run, so apart from the kernels' slots: the prepared activations of all products,
  // and the fp32 copies of gathered rows for the paths that read fp32 x.
  kSlotMatmulCopies = 5,
  kSlotMatmulX = 6,
  // Paged attention, one work item (attend_run): scaled q, accumulators, scores, softmax max
  // and sum, decoded V rows.
  kSlotAttnQs = 0,
  kSlotAttnAcc = 1,
  kSlotAttnScores = 2,
  kSlotAttnMax = 3,
  kSlotAttnSum = 4,
  kSlotAttnV = 5,
  // Paged attention on AMX tiles, one work item (attend_run_amx): tiles and buffers, scores,
  // kept rows, their scales.
  kSlotAmxAttnTiles = 0,
  kSlotAmxAttnScores = 1,
  kSlotAmxAttnKept = 2,
  kSlotAmxAttnKeptScales = 3,
  // paged_attention's list of runs: on the calling thread (worker 0), read by every worker
  // while the items run, so apart from every item slot.
  kSlotAttnRuns = 7,
};

}  // namespace densa::kernels_internal
