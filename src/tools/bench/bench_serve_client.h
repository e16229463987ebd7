#pragma once
// The benchmark's side of the wire: an OpenAI-API streaming client that timestamps every
// token chunk, the SSE splitter and chunk reader it uses, and the prompts it sends. It speaks
// only the public OpenAI API (/v1/completions or /v1/chat/completions with "stream": true and
// stream_options.include_usage), so it works against any compatible server.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tools/bench/bench_serve_metrics.h"

namespace httplib {
class Client;
}

namespace densa::bench {

// Splits a text/event-stream into events and hands each event's data (its "data:" lines
// joined by "\n") to on_data. Bytes may arrive split anywhere; CRLF and LF both end lines.
class SseParser {
 public:
  void feed(std::string_view bytes, const std::function<void(std::string_view data)>& on_data);

 private:
  std::string line_;   // the incomplete current line
  std::string data_;   // data lines of the current event
  bool has_data_ = false;
};

// What one SSE payload says. A token chunk is a choice that carries text (completions) or
// delta content (chat), or an unfinished choice (a token whose bytes are held back, e.g. an
// incomplete UTF-8 sequence); the usage-only chunk and the finish-only chunk are not tokens.
struct StreamChunk {
  bool done = false;        // the "[DONE]" sentinel
  bool is_token = false;
  std::optional<int64_t> prompt_tokens, completion_tokens;  // from "usage" when present
  std::optional<ServerStages> server;  // a choice's "densa_timing" (densa servers, opt-in)
  std::string error;        // non-empty for an {"error": ...} payload or unparsable JSON
};
StreamChunk parse_stream_chunk(std::string_view payload);

// scheme://host[:port][/prefix] + an endpoint path. The prefix is kept ("http://h/v1" with
// endpoint "/v1/completions" gives path "/v1/completions", not "/v1/v1/...").
struct Endpoint {
  std::string origin;   // "http://127.0.0.1:8080"
  std::string path;     // "/v1/completions"
  bool chat = false;    // the path ends in /chat/completions: send "messages"
};
Result<Endpoint> parse_endpoint(std::string_view base_url, std::string_view endpoint_path);

// One prompt to send.
struct BenchPrompt {
  std::string text;                 // sent when ids is empty
  std::vector<int32_t> ids;         // sent as the completions "prompt" array when non-empty
  int64_t num_tokens = 0;           // locally known prompt length; 0 = unknown
  int max_tokens = 128;
};

struct ClientOptions {
  Endpoint endpoint;
  std::string model;
  std::string api_key;              // sent as "Authorization: Bearer ..." when non-empty
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every request body
  double timeout_s = 600;
};

// The JSON body for one streamed request (temperature 0, include_usage, extra_body merged).
nlohmann::json request_body(const ClientOptions& opts, const BenchPrompt& prompt);

// One HTTP connection (kept alive between requests); not thread-safe: one per worker.
class StreamingClient {
 public:
  explicit StreamingClient(ClientOptions opts);
  ~StreamingClient();

  // Sends one streamed request and records its timings relative to `epoch`.
  RequestRecord send(const BenchPrompt& prompt, std::chrono::steady_clock::time_point epoch);

 private:
  ClientOptions opts_;
  std::unique_ptr<httplib::Client> http_;
};

// ---- datasets ----

// Random prompts of `input_len` words drawn from a fixed English word list (seeded). When
// `count_tokens` is given (a local tokenizer), words are added or removed until the text
// encodes to exactly input_len tokens (without BOS) and num_tokens is set.
std::vector<BenchPrompt> random_word_prompts(int num_prompts, int input_len, int output_len,
                                             uint64_t seed,
                                             const std::function<int64_t(const std::string&)>& count_tokens);
// Random token-id prompts in [id_lo, id_hi) (for servers that take token arrays).
std::vector<BenchPrompt> random_id_prompts(int num_prompts, int input_len, int output_len,
                                           uint64_t seed, int32_t id_lo, int32_t id_hi);
// Prompts from a file: JSONL with {"prompt": str[, "max_tokens": n]} per line, or plain text
// with one prompt per non-empty line. Cycled (in order) up to num_prompts.
Result<std::vector<BenchPrompt>> file_prompts(const std::string& path, int num_prompts, int output_len,
                                              const std::function<int64_t(const std::string&)>& count_tokens);

}  // namespace densa::bench
