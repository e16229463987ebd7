#pragma once
// RequestStream: the per-request event channel from the engine thread to whoever waits on
// the request (an HTTP handler). Thread-safe; the engine pushes, one consumer pops.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "engine/engine_types.h"

namespace densa {

class RequestStream {
 public:
  explicit RequestStream(RequestId id) : id_(id) {}
  RequestId id() const { return id_; }

  void push(TokenEvent event);
  // Waits up to `timeout` for the next event; nullopt on timeout.
  std::optional<TokenEvent> next(std::chrono::milliseconds timeout);
  // True once the final event (finish != kNone) has been pushed.
  bool closed() const;

 private:
  const RequestId id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  bool closed_ = false;
};

}  // namespace densa
