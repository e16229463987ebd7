#pragma once
// OpenAI response bodies: whole responses and streaming chunks for completions and chat
// completions, their logprobs objects and usage. Pure JSON building, no I/O.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/openai_request.h"
#include "server/choice_stream.h"
#include "text/tokenizer.h"

namespace densa::server {

// What every response and chunk of one request shares.
struct ResponseHeader {
  api::ApiKind kind = api::ApiKind::kCompletion;
  std::string id;     // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

// One finished choice of a non-streaming response.
struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprob> tokens;
  ChoiceFinish finish = ChoiceFinish::kNone;
};

// "stop" | "length" | null
nlohmann::json finish_reason_json(ChoiceFinish finish);
nlohmann::json usage_json(const Usage& usage);

// Logprobs object of a choice (or of one chunk's tokens): the legacy completions shape
// {tokens, token_logprobs, top_logprobs, text_offset} or the chat shape {content: [...]}.
// `text_offset_base` is the byte offset of the first token's text in the choice text.
nlohmann::json logprobs_json(api::ApiKind kind, const Tokenizer& tokenizer, const std::vector<TokenLogprob>& tokens,
                             size_t text_offset_base);

// Whole non-streaming response; choices[i] gets index i.
nlohmann::json response_json(const ResponseHeader& header, const Tokenizer& tokenizer,
                             const std::vector<ChoiceResult>& choices, bool with_logprobs, const Usage& usage);

// One streaming chunk carrying one choice's delta. For chat, `first` adds role "assistant".
// `include_usage` adds "usage": null (OpenAI's stream_options contract).
nlohmann::json chunk_json(const ResponseHeader& header, int index, const std::string& text,
                          const nlohmann::json& logprobs, ChoiceFinish finish, bool first, bool include_usage);
// The final usage chunk: "choices": [] and the usage.
nlohmann::json usage_chunk_json(const ResponseHeader& header, const Usage& usage);

// dump() that never throws: invalid UTF-8 (a split byte token) becomes U+FFFD.
std::string dump_json(const nlohmann::json& j);

}  // namespace densa::server
