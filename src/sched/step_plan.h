#pragma once
// StepPlan: what one engine step will do, decided by Scheduler::plan_step() without touching
// any state; StepResult: what the runner observed, fed back through Scheduler::commit().
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/status.h"
#include "kv/radix_cache.h"
#include "sched/request.h"

namespace densa {

// Tokens [begin, begin + num_tokens) of one request go through forward this step.
struct ScheduledChunk {
  RequestId id{};
  int32_t begin = 0;
  int32_t num_tokens = 0;
  bool sample = false;  // the chunk ends at the request's last token: sample the next one
};

// A waiting request becomes running, reusing `prefix` (retained at apply time).
struct Admission {
  RequestId id{};
  PrefixMatch prefix;
};

// Fresh pages for one request's table (all-or-nothing; cached pages are evicted first if the
// free list is short — plan_step has checked that free + evictable suffices).
struct PageGrant {
  RequestId id{};
  int32_t num_pages = 0;
};

struct StepPlan {
  std::vector<RequestId> preempt;       // running -> waiting front, pages released
  std::vector<Admission> admit;         // waiting -> running, FCFS order
  std::vector<PageGrant> grants;        // after preempt and admit
  std::vector<ScheduledChunk> chunks;   // [num_seqs] the batch, one chunk per request

  int32_t num_tokens() const {
    int32_t n = 0;
    for (const ScheduledChunk& c : chunks) n += c.num_tokens;
    return n;
  }
};

struct SampledToken {
  TokenId token = 0;
  float logprob = 0.0f;                               // when num_top_logprobs >= 0
  std::vector<std::pair<TokenId, float>> top_logprobs;  // [num_top_logprobs]
};

// Outcome of one chunk: a token when it sampled, or an error (integrity, output constraint,
// non-finite logits) that fails it.
struct ChunkOutcome {
  std::optional<SampledToken> sampled;
  Status error;
  // The error is the runner's refusal of a logit row holding NaN or +-inf (never sampled).
  bool nonfinite_logits = false;
};

struct StepResult {
  std::vector<ChunkOutcome> outcomes;  // [plan.chunks.size()]
  // Wall time of the KV integrity check before forward (block tables gathered, tracker run,
  // verdicts taken); nullopt when no check ran this step.
  std::optional<double> integrity_check_us;
};

// What the engine reports for a request after commit / abort.
struct RequestUpdate {
  RequestId id{};
  std::optional<SampledToken> sampled;
  FinishReason finish = FinishReason::kNone;
  Status error;
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;
  // RequestParams::export_kv and a normal finish: the request's table, its pages retained
  // once more for the exporter (released with PagePool::release_all when done).
  std::optional<BlockTable> exported;
};

}  // namespace densa
