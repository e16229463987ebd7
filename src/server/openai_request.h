#pragma once
// OpenAiRequest: the fields of POST /v1/completions and /v1/chat/completions that densa
// serves, parsed and type-checked from the JSON body. Unknown fields are ignored (as vLLM
// and llama.cpp do); a known field of the wrong type or out of range is a 400 naming it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "sample/sampler.h"

namespace densa::server {

enum class ApiKind { kCompletion, kChat };

struct ChatMessage {
  std::string role;     // system | user | assistant | tool | developer
  std::string content;  // text parts joined
};

// One completions prompt: text to tokenize, or token ids as given.
struct PromptInput {
  std::string text;
  std::vector<TokenId> ids;
  bool is_ids = false;
};

struct OpenAiRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;                   // empty when absent
  std::vector<PromptInput> prompts;    // completions: one per prompt (a list gives several)
  std::vector<ChatMessage> messages;   // chat
  std::optional<int> max_tokens;       // max_tokens or max_completion_tokens; nullopt: default
  SamplingParams sampling;             // temperature defaults to 1 as in the OpenAI API
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;       // stop strings, matched on the detokenized text
  int n = 1;                           // choices per prompt
  int num_top_logprobs = -1;           // -1: no logprobs; else alternatives per token
  bool echo = false;                   // completions: prepend the prompt text
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  bool ignore_eos = false;             // extension (as in vLLM): keep generating past EOS
  std::optional<bool> kv_integrity;    // extension densa_kv_integrity: override the KV check
  bool timing = false;                 // extension densa_timing: per-choice stage times in the response
};

inline constexpr int kMaxChoices = 16;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr int kMaxStopStrings = 16;

// A request that failed to parse: the Status (kInvalidArgument) and the offending field.
struct RequestError {
  Status status;
  std::string param;
};

// Deepest [ / { nesting outside JSON strings of `body`, stopping early once past `limit` (one
// linear pass). Bodies nested deeper than kMaxRequestJsonDepth are refused before parsing: a
// JSON parser takes seconds on megabytes of "[[[[", and no OpenAI request nests that deep.
inline constexpr int kMaxRequestJsonDepth = 32;
int json_nesting_depth(std::string_view body, int limit);

// Parses a request body. On failure returns nullopt and fills `error`.
std::optional<OpenAiRequest> parse_openai_request(ApiKind kind, std::string_view body, RequestError& error);

}  // namespace densa::server
