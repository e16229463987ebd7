#pragma once
// UpstreamCall: one HTTP request from the router to one worker, run by cpp-httplib's client
// on a thread of its own so that the caller can wait for the response head and each piece of
// the body with a bound, watch its own client meanwhile, and cancel at any time. The body is
// handed over as it arrives (an SSE stream chunk by chunk), never buffered to the end.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace httplib {
class Client;
}

namespace densa::router {

struct UpstreamRequest {
  std::string origin;   // "http://host:port"
  std::string method;   // "GET" | "POST"
  std::string path;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  int connect_timeout_ms = 2000;
  int read_timeout_ms = 300000;  // longest silence between two pieces of the response
};

// What happened next, in this order: kHead once, kBody any number of times, then kEnd or
// kFailed (kFailed may also come first: no connection, no head).
struct UpstreamEvent {
  enum class Kind { kNothing, kHead, kBody, kEnd, kFailed };
  Kind kind = Kind::kNothing;
  int status = 0;               // kHead
  std::string content_type;     // kHead
  std::string retry_after;      // kHead: the Retry-After header, if any
  std::string bytes;            // kBody: everything received since the last kBody
  std::string error;            // kFailed: what went wrong ("Connection", "Read", ...)
};

class UpstreamCall {
 public:
  // Starts the request at once.
  explicit UpstreamCall(UpstreamRequest request);
  // Cancels (if still running) and waits for the thread.
  ~UpstreamCall();
  UpstreamCall(const UpstreamCall&) = delete;
  UpstreamCall& operator=(const UpstreamCall&) = delete;

  // The next event, waiting at most `max_wait`; kNothing when nothing happened meanwhile.
  UpstreamEvent next(std::chrono::milliseconds max_wait);
  // Stops the request: its socket is shut down and the worker sees a closed connection.
  void cancel();

 private:
  void run();

  UpstreamRequest request_;
  std::unique_ptr<httplib::Client> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
  bool head_ready_ = false, head_taken_ = false;
  UpstreamEvent head_;
  std::string body_;             // received, not yet handed out
  bool finished_ = false;        // the thread is done; `failed_` says how
  bool failed_ = false;
  bool end_taken_ = false;
  std::string error_;
  std::thread thread_;
};

}  // namespace densa::router
