#pragma once
// ChoiceStream: one choice of an OpenAI response. Consumes one engine request's TokenEvents,
// detokenizes them incrementally (relative to the prompt, so a leading space survives),
// applies stop strings, and cancels the engine request when a stop string matches or when
// the ChoiceStream is dropped unfinished (client gone).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "text/tokenizer.h"
#include "server/metrics.h"
#include "server/stop_matcher.h"

namespace densa::server {

// A sampled token with its logprob and alternatives (when requested).
struct TokenLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<TokenId, float>> top;
};

// kToolCalls: a chat choice that ended (stop) after making tool calls; set by the handler.
enum class ChoiceFinish { kNone, kStop, kLength, kError, kToolCalls };

// What one poll added.
struct ChoiceUpdate {
  std::string text;                 // new text to send (may be empty)
  std::vector<TokenLogprob> tokens; // the token received (logprobs), if any
  ChoiceFinish finish = ChoiceFinish::kNone;  // set once, on the update that finishes
  Status error;                     // finish == kError
};

class ChoiceStream {
 public:
  // skip_special: special tokens are left out of the text (the OpenAI default); false gives
  // their text (skip_special_tokens: false, or a tool-call format whose markers are special
  // tokens), except for the token that ended generation.
  ChoiceStream(Engine& engine, std::shared_ptr<RequestStream> stream, const Tokenizer& tokenizer,
               std::vector<TokenId> prompt, std::vector<std::string> stop,
               std::chrono::steady_clock::time_point arrival, bool skip_special = true);
  ~ChoiceStream();  // cancels the engine request if it has not finished
  ChoiceStream(const ChoiceStream&) = delete;
  ChoiceStream& operator=(const ChoiceStream&) = delete;

  // Waits up to `timeout` for the next event and returns what it adds (at most one token).
  ChoiceUpdate poll(std::chrono::milliseconds timeout);
  bool finished() const { return finish_ != ChoiceFinish::kNone; }
  // Cancels the engine request (client gone); the choice counts as finished.
  void cancel();

  int num_prompt_tokens() const { return num_prompt_tokens_; }
  int num_cached_tokens() const { return num_cached_tokens_; }
  int num_generated_tokens() const { return num_generated_; }
  RequestTiming timing() const;
  // The engine's stage times, once its final event has been consumed (nullopt before, and for
  // engines that keep none).
  const std::optional<RequestTimeline>& engine_timeline() const { return timeline_; }
  // After a stop-string finish the engine's (aborted) final event is still on its way: waits up
  // to `timeout` for it so engine_timeline() is known. True once the engine is done.
  bool await_engine(std::chrono::milliseconds timeout);
  std::chrono::steady_clock::time_point arrival() const { return arrival_; }

 private:
  void apply(TokenEvent& event, ChoiceUpdate& update);
  void finish(ChoiceFinish reason, ChoiceUpdate& update);

  Engine& engine_;
  std::shared_ptr<RequestStream> stream_;
  const Tokenizer& tokenizer_;
  std::vector<TokenId> ids_;  // prompt + generated
  size_t emitted_bytes_ = 0;  // bytes of decode(ids_) already passed to the stop matcher
  StopMatcher stop_;
  bool skip_special_ = true;
  ChoiceFinish finish_ = ChoiceFinish::kNone;
  bool engine_done_ = false;  // the engine sent its final event
  int num_prompt_tokens_ = 0;
  int num_cached_tokens_ = 0;
  int num_generated_ = 0;
  std::chrono::steady_clock::time_point arrival_;
  std::optional<std::chrono::steady_clock::time_point> first_token_;
  std::chrono::steady_clock::time_point last_event_;
  std::optional<RequestTimeline> timeline_;
};

}  // namespace densa::server
