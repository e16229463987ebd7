#pragma once
// Request: one generation request as the scheduler sees it — its tokens, its KV block table
// and its sampler. The engine layer maps GenerateRequest onto RequestParams (sched sits below
// engine and cannot see it).
//
// States (only the Scheduler moves a request between them):
//
//   waiting --admit--> running --finish (stop / length)--> finished
//      ^                  |  \--abort / error-----------> finished
//      `----preempt-------'     (pages released, recompute later from tokens)
//
// While running, tokens[0, num_computed_tokens) have their KV in `table` and the rest (the
// unprocessed prompt part, or the one sampled-but-not-yet-fed token) run in later steps.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "kv/block_table.h"
#include "kv/fault_injection.h"
#include "sample/sampler.h"
#include "sample/token_constraint.h"

namespace densa {

enum class RequestState : uint8_t { kWaiting, kRunning, kFinished };

// Why a request ended: the scheduler decides it, the engine's TokenEvent carries it out.
enum class FinishReason : uint8_t {
  kNone,     // more events follow
  kStop,     // EOS or a stop token
  kLength,   // max_new_tokens or the context limit
  kAborted,  // cancelled by the client
  kError,    // failed; TokenEvent::error says why (e.g. a KV integrity violation)
};

struct RequestParams {
  SamplingParams sampling;
  int32_t max_new_tokens = 16;
  bool ignore_eos = false;
  std::vector<TokenId> stop_token_ids;
  int32_t num_top_logprobs = -1;  // < 0: no logprobs
  std::optional<bool> kv_integrity;  // overrides the engine's KV integrity policy; nullopt: follow it
  // Prefill-only export (disaggregation): on a normal finish the request's pages are retained
  // once more and handed out in RequestUpdate::exported instead of being freed.
  bool export_kv = false;
  // Structured output / tool-call grammar: masks every sample and sees every sampled token.
  // One per request (stateful); null: unconstrained.
  std::shared_ptr<TokenConstraint> constraint;
  // Prefix-cache namespace (RadixCache): requests share cached pages only with requests of
  // the same salt; "" is the shared namespace.
  std::string cache_salt;
  // Tests and soak runs only: the KV fault this request still asks to be the victim of
  // (GenerateRequest::inject_fault); cleared once it fired.
  std::optional<KvFault> inject_fault;
};

struct Request {
  Request(RequestId id_, std::vector<TokenId> prompt, RequestParams params_)
      : id(id_),
        params(std::move(params_)),
        tokens(std::move(prompt)),
        num_prompt_tokens(static_cast<int32_t>(tokens.size())),
        sampler(params.sampling) {}

  RequestId id;
  RequestParams params;
  std::vector<TokenId> tokens;         // [num_prompt_tokens + num_generated()]
  int32_t num_prompt_tokens;
  int32_t num_computed_tokens = 0;     // == table.num_tokens while running
  BlockTable table;
  Sampler sampler;                     // per-request RNG; survives preemption
  RequestState state = RequestState::kWaiting;
  int32_t num_cached_tokens = 0;       // prompt tokens served by the prefix cache at first admission
  bool admitted_once = false;
  int32_t num_preemptions = 0;
  std::chrono::steady_clock::time_point arrival_time = std::chrono::steady_clock::now();

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_generated() const { return num_tokens() - num_prompt_tokens; }
  // A request whose table already holds KV for tokens[0, num_computed_tokens) when it is
  // added (pages imported from a prefill worker). Admission keeps its pages.
  bool prefilled() const { return state == RequestState::kWaiting && num_computed_tokens > 0; }
  // Tokens still to feed before the next sample (>= 1 while running).
  int32_t num_pending() const { return num_tokens() - num_computed_tokens; }
};

}  // namespace densa
