#include "server/choice_stream.h"

#include <algorithm>

namespace densa::server {

ChoiceStream::ChoiceStream(Engine& engine, std::shared_ptr<RequestStream> stream, const Tokenizer& tokenizer,
                           std::vector<TokenId> prompt, std::vector<std::string> stop,
                           std::chrono::steady_clock::time_point arrival, bool skip_special)
    : engine_(engine),
      stream_(std::move(stream)),
      tokenizer_(tokenizer),
      ids_(std::move(prompt)),
      stop_(std::move(stop)),
      skip_special_(skip_special),
      num_prompt_tokens_(static_cast<int>(ids_.size())),
      arrival_(arrival),
      last_event_(arrival) {
  // Hold back nothing of the prompt: only text after it is the completion.
  emitted_bytes_ = tokenizer_.decode(ids_, skip_special_).size();
}

ChoiceStream::~ChoiceStream() {
  if (!engine_done_) engine_.cancel(stream_->id());
}

void ChoiceStream::cancel() {
  if (!engine_done_) engine_.cancel(stream_->id());
  engine_done_ = true;
  if (finish_ == ChoiceFinish::kNone) finish_ = ChoiceFinish::kError;
}

void ChoiceStream::finish(ChoiceFinish reason, ChoiceUpdate& update) {
  finish_ = reason;
  update.finish = reason;
}

void ChoiceStream::apply(TokenEvent& e, ChoiceUpdate& update) {
  if (e.time == std::chrono::steady_clock::time_point{}) e.time = std::chrono::steady_clock::now();
  last_event_ = e.time;
  if (e.num_prompt_tokens > 0) num_prompt_tokens_ = e.num_prompt_tokens;
  num_cached_tokens_ = std::max(num_cached_tokens_, e.num_cached_tokens);
  if (e.finish != FinishReason::kNone) {
    engine_done_ = true;
    if (e.timeline) timeline_ = std::move(e.timeline);
  }
  if (finished()) return;  // after a stop-string match: drain the engine's tail silently

  if (e.token) {
    if (!first_token_) first_token_ = e.time;
    ++num_generated_;
    const bool last = e.finish != FinishReason::kNone;
    // The token that ended generation (EOS or a stop token) is not part of the text, also
    // when special tokens are shown.
    if (!(last && e.finish == FinishReason::kStop && tokenizer_.is_special(*e.token))) ids_.push_back(*e.token);
    update.tokens.push_back({*e.token, e.logprob, std::move(e.top_logprobs)});
    update.text += stop_.feed(tokenizer_.decode_incremental(ids_, emitted_bytes_, last, skip_special_));
    if (stop_.matched()) {
      engine_.cancel(stream_->id());
      finish(ChoiceFinish::kStop, update);
      return;
    }
  }
  switch (e.finish) {
    case FinishReason::kNone: return;
    case FinishReason::kStop:
    case FinishReason::kLength:
      update.text += stop_.feed(tokenizer_.decode_incremental(ids_, emitted_bytes_, /*flush=*/true, skip_special_));
      if (stop_.matched()) {
        finish(ChoiceFinish::kStop, update);
        return;
      }
      update.text += stop_.flush();
      finish(e.finish == FinishReason::kStop ? ChoiceFinish::kStop : ChoiceFinish::kLength, update);
      return;
    case FinishReason::kAborted:
      update.error = Status(StatusCode::kAborted, "request was cancelled by the engine");
      finish(ChoiceFinish::kError, update);
      return;
    case FinishReason::kError:
      update.error = e.error.is_ok() ? internal_error("engine error") : e.error;
      finish(ChoiceFinish::kError, update);
      return;
  }
}

ChoiceUpdate ChoiceStream::poll(std::chrono::milliseconds timeout) {
  ChoiceUpdate update;
  if (engine_done_ && finished()) return update;
  // One event per poll, so a stream sends one chunk per token (no coalescing).
  if (std::optional<TokenEvent> e = stream_->next(timeout)) apply(*e, update);
  return update;
}

bool ChoiceStream::await_engine(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!engine_done_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    std::optional<TokenEvent> e = stream_->next(left);
    if (!e) return false;
    if (e->finish != FinishReason::kNone) {
      engine_done_ = true;
      if (e->timeline) timeline_ = std::move(e->timeline);
    }
  }
  return true;
}

RequestTiming ChoiceStream::timing() const {
  using Seconds = std::chrono::duration<double>;
  RequestTiming t;
  if (first_token_) {
    t.ttft_s = Seconds(*first_token_ - arrival_).count();
    if (num_generated_ >= 2) t.tpot_s = Seconds(last_event_ - *first_token_).count() / (num_generated_ - 1);
  }
  t.e2e_s = Seconds(last_event_ - arrival_).count();
  return t;
}

}  // namespace densa::server
