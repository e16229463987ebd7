#pragma once
// OpenAiRequest: the fields of POST /v1/completions and /v1/chat/completions that densa
// serves, parsed and type-checked from the JSON body. No field is silently ignored: every
// top-level field is served, accepted-and-ignored by name (kIgnoredFields: fields that change
// nothing about the output, such as `user`), accepted only at its default value (a penalty of
// 0, best_of 1), or refused with a 400 that names it. A known field of the wrong type or out of
// range is a 400 naming it too. The table lives in server/README.md.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/ids.h"
#include "core/status.h"
#include "kv/fault_injection.h"
#include "sample/sampler.h"

namespace densa::api {

enum class ApiKind { kCompletion, kChat };

struct ChatMessage {
  std::string role;     // system | user | assistant | tool | developer
  std::string content;  // text parts joined
  // The message as sent (content parts, name, tool_calls, tool_call_id, reasoning_content),
  // for chat templates that read more than role and content; keys in the order sent, since
  // templates print objects (tojson) as Python keeps them.
  nlohmann::ordered_json raw;
};

// response_format: what the answer must be.
enum class ResponseFormatKind { kText, kJsonObject, kJsonSchema, kRegex, kEbnf };

struct ResponseFormat {
  ResponseFormatKind kind = ResponseFormatKind::kText;
  nlohmann::ordered_json schema;  // kJsonSchema: json_schema.schema, keys in the order sent
  std::string name;        // kJsonSchema: json_schema.name
  bool strict = false;     // kJsonSchema: json_schema.strict
  std::string grammar;     // kRegex: the pattern; kEbnf: the grammar text
};

enum class ToolChoiceKind { kAuto, kNone, kRequired, kNamed };

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
  // Extension densa_inject_fault (tests and soak runs; refused unless the server runs with
  // --test-allow-fault-injection): each choice's engine request is the victim of this KV fault.
  std::optional<KvFault> inject_fault;
  // Chat only. tools: [{"type":"function","function":{name, description, parameters}}], as sent.
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // key order as sent (templates print them)
  ToolChoiceKind tool_choice = ToolChoiceKind::kAuto;  // the OpenAI default with tools
  std::string tool_choice_name;        // kNamed: the function
  bool parallel_tool_calls = true;
  ResponseFormat response_format;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();  // extension (as vLLM)
  bool add_generation_prompt = true;   // extension (as vLLM)
  bool skip_special_tokens = true;     // extension (as vLLM): hide special tokens from the text
  std::string cache_salt;              // extension (as vLLM): prefix-cache namespace; "" shared
};

// Top-level request fields densa accepts and ignores, because they change nothing about the
// output it serves (listed in server/README.md).
inline constexpr const char* kIgnoredFields[] = {"user", "metadata", "service_tier", "store"};

inline constexpr int kMaxChoices = 16;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr int kMaxStopStrings = 16;
// Bytes of one stop string: the stream holds back up to this much text that may start one.
inline constexpr size_t kMaxStopStringBytes = 1024;
inline constexpr size_t kMaxCacheSaltBytes = 256;

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

}  // namespace densa::api
