#include "router/upstream_call.h"

#include <httplib.h>

namespace densa::router {

UpstreamCall::UpstreamCall(UpstreamRequest request)
    : request_(std::move(request)), client_(std::make_unique<httplib::Client>(request_.origin)) {
  const auto ms = [](int v) { return std::chrono::milliseconds(std::max(1, v)); };
  client_->set_connection_timeout(ms(request_.connect_timeout_ms));
  client_->set_tcp_nodelay(true);
  client_->set_read_timeout(ms(request_.read_timeout_ms));
  client_->set_write_timeout(ms(request_.read_timeout_ms));
  client_->set_keep_alive(false);
  thread_ = std::thread([this] { run(); });
}

UpstreamCall::~UpstreamCall() {
  cancel();
  // stop() only reaches a socket that exists; one made just after it is caught by the next.
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(20), [&] { return finished_; })) {
    lock.unlock();
    client_->stop();
    lock.lock();
  }
  lock.unlock();
  thread_.join();
}

void UpstreamCall::cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_ || finished_) return;
    cancelled_ = true;
  }
  client_->stop();
}

void UpstreamCall::run() {
  httplib::Request req;
  req.method = request_.method;
  req.path = request_.path;
  req.body = request_.body;
  for (const auto& [k, v] : request_.headers) req.set_header(k, v);
  req.response_handler = [this](const httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    head_.kind = UpstreamEvent::Kind::kHead;
    head_.status = res.status;
    head_.content_type = res.get_header_value("Content-Type");
    head_.retry_after = res.get_header_value("Retry-After");
    head_ready_ = true;
    cv_.notify_all();
    return !cancelled_;
  };
  req.content_receiver = [this](const char* data, size_t len, uint64_t, uint64_t) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return false;
    body_.append(data, len);
    cv_.notify_all();
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool ok = false;
  bool skip = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    skip = cancelled_;
  }
  if (!skip) {
    try {
      ok = client_->send(req, res, err);
    } catch (...) {
      ok = false;
      err = httplib::Error::Unknown;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (ok && !head_ready_) {  // no body (204, HEAD): httplib skips the response handler
    head_.kind = UpstreamEvent::Kind::kHead;
    head_.status = res.status;
    head_.content_type = res.get_header_value("Content-Type");
    head_ready_ = true;
  }
  finished_ = true;
  failed_ = !ok || cancelled_;
  if (failed_) error_ = cancelled_ ? "cancelled" : httplib::to_string(err);
  cv_.notify_all();
}

UpstreamEvent UpstreamCall::next(std::chrono::milliseconds max_wait) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, max_wait, [&] {
    return (head_ready_ && !head_taken_) || (head_taken_ && !body_.empty()) || finished_;
  });
  UpstreamEvent ev;
  if (head_ready_ && !head_taken_) {
    head_taken_ = true;
    return head_;
  }
  if (head_taken_ && !body_.empty()) {
    ev.kind = UpstreamEvent::Kind::kBody;
    ev.bytes.swap(body_);
    return ev;
  }
  if (finished_ && !end_taken_) {
    end_taken_ = true;
    ev.kind = failed_ ? UpstreamEvent::Kind::kFailed : UpstreamEvent::Kind::kEnd;
    ev.error = error_;
  }
  return ev;
}

}  // namespace densa::router
