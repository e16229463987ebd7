#pragma once
// Runner: executes one StepPlan's batch. It turns the plan's chunks into a ForwardBatch and a
// KvView over the PagePool (the block tables of the batch's requests, concatenated), calls
// model::forward, and samples the next token of every chunk that ends at its request's last
// token with that request's own Sampler. It owns only reusable buffers.
#include <span>
#include <vector>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/thread_pool.h"
#include "exec/integrity_tracker.h"
#include "exec/routing_stats.h"
#include "exec/tag_tracker.h"
#include "kv/fault_injection.h"
#include "kv/page_pool.h"
#include "model/forward.h"
#include "model/model_weights.h"
#include "sched/request.h"
#include "sched/step_plan.h"

namespace densa {

// One rank of a tensor / expert parallel group, as the leader last gathered it (/metrics).
struct RankStats {
  int rank = 0;
  int64_t rss_bytes = 0;     // resident memory (/proc/self/statm)
  int64_t weight_bytes = 0;  // this rank's slice, as stored (ModelWeights::weight_bytes)
  double comm_seconds = 0;   // time inside collectives (Communicator::busy_seconds, all groups)
  int64_t batches = 0;       // forward passes run
};

// KV layout of `weights` for pages of `page_size` tokens stored as `kv_dtype`. The one place
// the scale mode is decided: none unless fp8; fp8 static with `static_scales` (the scales come
// with the engine config), else dynamic per-token scales. MLA configs get a latent layout
// (kv_lora_rank + qk_rope_head_dim per token per layer).
KvLayout kv_layout_for(const ModelConfig& config, int32_t page_size, DType kv_dtype, bool static_scales = false);

class Runner {
 public:
  // `weights` and `threads` must outlive the runner; `tracker` may be null (no check).
  Runner(const ModelWeights& weights, ThreadPool* threads, IntegrityTracker* tracker = nullptr);

  // requests: [plan.chunks.size()] the request of each chunk, in chunk order; their tables
  // already hold pages for every token of their chunk (Scheduler::apply). Chunks whose
  // request fails the integrity check are left out of the batch and reported as errors.
  StepResult run(const StepPlan& plan, std::span<Request* const> requests, PagePool& pool);
  // MoE: after every forward, record the batch's routing and expert GEMM time into `stats`
  // (not owned; null = nothing recorded, no clock reads).
  void set_routing_stats(RoutingStats* stats) { routing_ = stats; }
  // fp8 static KV: the scales [layer][k|v][kv_head] every batch's KvView carries (copied).
  void set_static_kv_scales(std::span<const float> scales) { static_scales_.assign(scales.begin(), scales.end()); }

  // Tensor / expert parallel (comm/communicator.h): `comms` (not owned, outlives the runner)
  // names this rank's groups. On the leader (world rank 0) run() sends each batch (tokens,
  // positions, sequences, block tables) to the other ranks before its forward pass; the
  // others sit in follow(). Only the leader samples: the followers' passes produce no logits.
  void set_parallel(const ParallelComms* comms) {
    parallel_ = comms;
    scratch_.parallel = comms;
  }
  // A follower's loop: receives each batch from the leader and runs its slice of the forward
  // pass over `pool` (this rank's KV shard, the same page ids as the leader's), until the
  // leader calls release_followers(). Idles without the communicator's timeout between batches.
  // KV integrity: when the leader's tracker checks a batch and can share its policy
  // (IntegrityTracker::policy_for_followers), it first sends the batch's tables, (page, tag)
  // pairs and overrides; each follower takes the leader's tags (PagePool::mirror_page), runs a
  // TagTracker with that policy over its own pool, whose page digests cover its own bytes, and
  // every rank's verdicts are gathered: a request whose KV is wrong on any rank fails, the error
  // naming the rank. `fault` (tests only, may be null): a kBitFlip FaultInjector fired on this
  // rank's pages, counting followed batches as its steps.
  void follow(PagePool& pool, FaultInjector* fault = nullptr);
  // The leader's last word: the followers' follow() returns. Call once, after the last run().
  void release_followers();

  // Commands for the layers above (prefill/decode disaggregation moves each rank's KV shard):
  // the leader broadcasts an opaque payload between batches, every follower runs its handler
  // on it with its own pool, and the leader gets each follower's reply (world rank r at index
  // r - 1). By convention an empty reply means success. A handler must return within the
  // communicator's timeout (the leader waits in a gather); a follower without a handler
  // answers "no command handler on rank r". Alone: no followers, an empty vector.
  using CommandHandler = std::function<std::string(std::span<const uint8_t> payload, PagePool& pool)>;
  void set_command_handler(CommandHandler handler) { command_handler_ = std::move(handler); }
  std::vector<std::string> command_followers(std::span<const uint8_t> payload);
  // Leader: every rank's stats, gathered with a batch about once a second while batches run
  // (one all-gather of four numbers per rank); empty before the first gather or alone.
  const std::vector<RankStats>& rank_stats() const { return rank_stats_; }

 private:
  const ModelWeights& weights_;
  ThreadPool* threads_;
  IntegrityTracker* tracker_;
  ForwardScratch scratch_;
  RoutingStats* routing_ = nullptr;
  // Batch buffers, reused between steps.
  std::vector<TokenId> tokens_;         // [num_tokens]
  std::vector<int32_t> positions_;      // [num_tokens]
  std::vector<int32_t> seq_idx_;        // [num_tokens]
  std::vector<int32_t> logit_rows_;     // [num_logits]
  std::vector<int32_t> logit_chunk_;    // [num_logits] chunk index of each logit row
  std::vector<int32_t> block_table_;    // pages of all batch sequences, concatenated
  std::vector<int32_t> block_offsets_;  // [num_seqs + 1]
  std::vector<float> logits_;           // [num_logits, vocab]
  std::vector<uint64_t> mask_;          // [constrained rows, ceil(vocab / 64)] their allowed tokens
  std::vector<int32_t> mask_row_;       // [num_logits] row of mask_ of each logit row; -1 unconstrained
  std::vector<float> masked_;           // [vocab] its logits with the forbidden ones at -inf
  std::vector<float> static_scales_;    // [layer][k|v][kv_head]; empty unless fp8 static KV
  const ParallelComms* parallel_ = nullptr;
  std::vector<uint8_t> message_;        // a batch as sent to the followers
  std::unique_ptr<TagTracker> follower_tracker_;  // a follower's check of its own shard
  std::vector<RankStats> rank_stats_;   // leader: as of the last gather
  std::chrono::steady_clock::time_point last_stats_{};
  int64_t batches_ = 0;                 // forward passes this rank ran
  std::vector<int32_t> stats_flag_;     // [1]: 1 when a batch carries a stats gather
  CommandHandler command_handler_;      // a follower's (set_command_handler)
  // Every rank's `mine`, in world rank order (two all-gathers: lengths, then the bytes).
  std::vector<std::string> gather_strings(const std::string& mine);
  void gather_stats();                  // every rank calls it with the same batch
  bool spans_ranks() const { return parallel_ != nullptr && parallel_->spans_ranks(); }
  // The pool's pages under this batch's block tables (block_table_, block_offsets_).
  KvView batch_view(PagePool& pool) const;
  // A follower: a page id from the leader outside this rank's pool ends the group.
  void check_page(const PagePool& pool, int32_t page) const;
  // Leader: the integrity check's tables sent to the followers and their verdicts merged.
  void check_on_followers(const PagePool& pool, std::span<const BlockTable* const> tables,
                          std::span<const IntegrityOverride> overrides, std::span<Request* const> requests,
                          const KvIntegrityPolicy& policy, std::span<Status> verdicts);
  // Follower: one check message handled (verify this rank's shard, gather the verdicts).
  void follower_check(PagePool& pool, size_t pos, FaultInjector* fault, int64_t step);

  // run()'s steps, in order.
  // The integrity check of a batch that reads cached KV (when the tracker or a request asks
  // for it): each failing chunk's error and the check's time into `result`.
  void check_integrity(const StepPlan& plan, std::span<Request* const> requests, PagePool& pool,
                       StepResult& result);
  // The batch buffers (tokens_ .. block_offsets_) filled from the chunks whose `outcomes` are
  // still ok; returns the number of sequences in the batch.
  int32_t assemble_batch(const StepPlan& plan, std::span<Request* const> requests, const PagePool& pool,
                         std::span<const ChunkOutcome> outcomes);
  // Leader: the assembled batch broadcast to the followers (about once a second with a stats
  // gather flag set).
  void send_batch();
  // The forward pass over the assembled batch into logits_ (sent to the followers first when
  // the runner spans ranks), with the routing stats recorded.
  void forward_batch(PagePool& pool);
  // mask_ / mask_row_: the allowed tokens of each constrained logit row.
  void fill_constraint_masks(std::span<Request* const> requests);
  // Each logit row refused (non-finite logits, a constraint that allows nothing) or sampled
  // into its chunk's outcome; `num_seqs` is named in the non-finite error.
  void sample_rows(std::span<Request* const> requests, int32_t num_seqs, StepResult& result);
};

}  // namespace densa
