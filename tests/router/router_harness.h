#pragma once
// In-process helpers for router tests over real sockets: FakeWorker (a cpp-httplib server
// whose routes a test writes, standing in for a worker where a test needs a behaviour no
// real worker shows on demand, e.g. dying mid-stream), RouterUnderTest (a RouterServer on a
// free port in a thread) and a small HTTP client that records SSE events as they arrive.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "router/router_server.h"
#include "router/sse_framer.h"

namespace densa::router::testing {

class FakeWorker {
 public:
  // `routes` registers handlers; GET /health answers 200 unless set_healthy(false).
  explicit FakeWorker(const std::function<void(httplib::Server&)>& routes = {}) {
    http_.new_task_queue = [] { return new httplib::ThreadPool(16); };
    http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.status = healthy_.load() ? 200 : 503;
      res.set_content("{}", "application/json");
    });
    if (routes) routes(http_);
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
  }
  ~FakeWorker() { stop(); }
  void stop() {
    http_.stop();
    if (thread_.joinable()) thread_.join();
  }
  void set_healthy(bool h) { healthy_.store(h); }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server http_;
  std::atomic<bool> healthy_{true};
  int port_ = 0;
  std::thread thread_;
};

class RouterUnderTest {
 public:
  // `config.prefill` / `decode` from URL lists; port 0.
  RouterUnderTest(const std::vector<std::string>& prefill, const std::vector<std::string>& decode,
                  RouterConfig config = {}) {
    for (const std::string& u : prefill) config.prefill.push_back(parse_worker_url(u).value());
    for (const std::string& u : decode) config.decode.push_back(parse_worker_url(u).value());
    config.port = 0;
    server_ = std::make_unique<RouterServer>(config);
    const Status s = server_->bind();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    thread_ = std::thread([this] { server_->run(); });
  }
  ~RouterUnderTest() {
    server_->stop();
    thread_.join();
  }
  int port() const { return server_->bound_port(); }
  const RouterContext& context() const { return server_->context(); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(std::chrono::seconds(60));
    return c;
  }

 private:
  std::unique_ptr<RouterServer> server_;
  std::thread thread_;
};

// Waits (up to `limit`) until pred() holds; the wait is a bound, not a timing claim.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// A streamed POST on its own thread; the data of each SSE event is recorded as it arrives.
class StreamingRequest {
 public:
  StreamingRequest(int port, std::string path, std::string body) {
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port);
    client_->set_read_timeout(std::chrono::seconds(60));
    thread_ = std::thread([this, path = std::move(path), body = std::move(body)] {
      httplib::Request req;
      req.method = "POST";
      req.path = path;
      req.body = body;
      req.set_header("Content-Type", "application/json");
      SseFramer framer;
      req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
        std::lock_guard<std::mutex> lock(mu_);
        for (const std::string& e : framer.feed(std::string_view(data, len))) events_.push_back(sse_event_data(e));
        cv_.notify_all();
        return true;
      };
      httplib::Response res;
      httplib::Error err;
      client_->send(req, res, err);
      std::lock_guard<std::mutex> lock(mu_);
      status_ = res.status;
      done_ = true;
      cv_.notify_all();
    });
  }
  ~StreamingRequest() { join(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  // Closes the connection now (thread-safe in cpp-httplib).
  void hang_up() { client_->stop(); }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  size_t num_events() { return events().size(); }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  int status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
  int status_ = 0;
  bool done_ = false;
  std::unique_ptr<httplib::Client> client_;
  std::thread thread_;
};

}  // namespace densa::router::testing
