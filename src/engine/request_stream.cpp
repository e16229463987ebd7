#include "engine/request_stream.h"

namespace densa {

void RequestStream::push(TokenEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    if (event.finish != FinishReason::kNone) closed_ = true;
    events_.push_back(std::move(event));
  }
  cv_.notify_one();
}

std::optional<TokenEvent> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return std::nullopt;
  TokenEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

bool RequestStream::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

}  // namespace densa
