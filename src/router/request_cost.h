#pragma once
// RequestCost: what the router guesses an OpenAI request will cost a worker, read from the
// JSON body without a tokenizer (the router has no model). The guess only orders workers by
// load; the worker validates the request. Any body, even empty or not JSON, gets a cost.
#include <cstdint>
#include <string_view>

#include "api/openai_request.h"

namespace densa::router {

// Prompt text is guessed at one token per this many bytes (English BPE averages ~4).
inline constexpr int64_t kBytesPerTokenGuess = 4;
// max_tokens when the body has none: the server's completions default; chat defaults to
// "the rest of the context", which the router cannot know, so it guesses this.
inline constexpr int64_t kDefaultCompletionMaxTokens = 16;
inline constexpr int64_t kDefaultChatMaxTokensGuess = 256;

struct RequestCost {
  int64_t prompt_tokens = 0;     // all prompts of the request (completions may list several)
  int64_t max_new_tokens = 0;    // max_tokens x n x number of prompts
  bool stream = false;

  // What the router charges: the prefill worker holds the prompt, the decode worker the
  // prompt and everything it may generate.
  int64_t prefill_tokens() const { return prompt_tokens; }
  int64_t decode_tokens() const { return prompt_tokens + max_new_tokens; }
};

RequestCost estimate_request_cost(api::ApiKind kind, std::string_view body);

}  // namespace densa::router
