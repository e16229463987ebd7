#pragma once
// What crosses the engine boundary: a request in, a stream of events out. No JSON, no text
// formatting here (server/ maps these to the OpenAI API).
#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "engine/request_timeline.h"
#include "sample/sampler.h"

namespace densa {

using RequestId = uint64_t;

struct GenerateRequest {
  std::vector<TokenId> prompt;          // with BOS, already tokenized
  SamplingParams sampling;              // temperature 0 = greedy
  int max_new_tokens = 16;
  bool ignore_eos = false;
  std::vector<TokenId> stop_token_ids;  // finish (reason stop) when one is sampled
  int num_top_logprobs = -1;            // -1: no logprobs; 0..20: chosen token + that many alternatives
  std::optional<bool> kv_integrity;     // true / false overrides the engine's KV integrity policy
};

enum class FinishReason : uint8_t {
  kNone,     // more events follow
  kStop,     // EOS or a stop token
  kLength,   // max_new_tokens or the context limit
  kAborted,  // cancelled by the client
  kError,    // failed; TokenEvent::error says why (e.g. a KV integrity violation)
};

// One generated token, or the final event. The last event of a request has finish != kNone;
// it may carry a token (the one that hit the limit) or none (error / abort).
struct TokenEvent {
  std::optional<TokenId> token;
  float logprob = 0.0f;
  std::vector<std::pair<TokenId, float>> top_logprobs;
  FinishReason finish = FinishReason::kNone;
  Status error;                 // set when finish == kError
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;  // prompt tokens served from the prefix cache
  std::chrono::steady_clock::time_point time;
  std::optional<RequestTimeline> timeline;  // on the final event only: where the time went
};

}  // namespace densa
