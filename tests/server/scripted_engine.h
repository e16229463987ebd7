#pragma once
// ScriptedEngine: a test double of Engine for in-process HTTP tests. Each request "generates"
// a fixed token script (cycled) on its own thread, one token per `token_interval`, and honours
// max_new_tokens, stop_token_ids, num_top_logprobs, cancel() and a waiting-queue limit.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace densa::testing {

class ScriptedEngine : public Engine {
 public:
  ScriptedEngine(std::vector<TokenId> script, int max_active, int context_tokens)
      : script_(std::move(script)), max_active_(max_active), context_tokens_(context_tokens) {}
  ~ScriptedEngine() override { shutdown(); }

  std::chrono::milliseconds token_interval{2};

  Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request) override {
    if (request.prompt.empty()) return invalid_argument("empty prompt");
    if (static_cast<int>(request.prompt.size()) + request.max_new_tokens > context_tokens_)
      return out_of_range("prompt + max_new_tokens exceeds the context");
    std::lock_guard<std::mutex> lock(mu_);
    if (active_ >= max_active_) return resource_exhausted("queue full");
    ++active_;
    ++submitted_;
    last_request_ = request;
    const RequestId id(next_id_++);
    auto stream = std::make_shared<RequestStream>(id);
    cancelled_[id] = false;
    threads_.emplace_back([this, id, stream, request] { run(id, *stream, request); });
    return stream;
  }
  void cancel(RequestId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cancelled_.find(id); it != cancelled_.end()) it->second = true;
  }
  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    EngineStats s;
    s.num_running = active_;
    s.kv_pages_total = 1000;
    s.kv_pages_used = active_;
    s.requests_finished = finished_;
    return s;
  }
  Status audit() override {
    std::lock_guard<std::mutex> lock(mu_);
    return active_ == 0 ? Status::ok() : internal_error("requests still hold pages");
  }
  void shutdown() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, c] : cancelled_) c = true;
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  int num_cancelled() const { return num_cancelled_.load(); }
  int num_submitted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }
  GenerateRequest last_request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }

 private:
  bool is_cancelled(RequestId id) {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_[id];
  }
  void run(RequestId id, RequestStream& stream, const GenerateRequest& r) {
    TokenEvent final_event;
    for (int i = 0;; ++i) {
      std::this_thread::sleep_for(token_interval);
      if (is_cancelled(id)) {
        ++num_cancelled_;
        final_event.finish = FinishReason::kAborted;
        break;
      }
      TokenEvent e;
      e.token = script_[i % script_.size()];
      e.logprob = -0.5f;
      if (r.num_top_logprobs > 0)
        for (int k = 0; k < r.num_top_logprobs; ++k) e.top_logprobs.push_back({*e.token + k, -0.5f - k});
      e.num_prompt_tokens = static_cast<int32_t>(r.prompt.size());
      e.time = std::chrono::steady_clock::now();
      bool stop = false;
      for (TokenId s : r.stop_token_ids) stop = stop || s == *e.token;
      if (stop) e.finish = FinishReason::kStop;
      else if (i + 1 >= r.max_new_tokens) e.finish = FinishReason::kLength;
      const bool last = e.finish != FinishReason::kNone;
      if (last) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          --active_;
          ++finished_;
        }
        stream.push(std::move(e));
        return;
      }
      stream.push(std::move(e));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --active_;
      ++finished_;
    }
    final_event.time = std::chrono::steady_clock::now();
    stream.push(std::move(final_event));
  }

  const std::vector<TokenId> script_;
  const int max_active_;
  const int context_tokens_;
  mutable std::mutex mu_;
  std::map<RequestId, bool> cancelled_;
  std::vector<std::thread> threads_;
  int active_ = 0;
  int submitted_ = 0;
  int64_t finished_ = 0;
  uint64_t next_id_ = 1;
  GenerateRequest last_request_;
  std::atomic<int> num_cancelled_{0};
};

}  // namespace densa::testing
