// The HTTP layer's resource limits, each on a real `densa serve` with the flag set low: a body
// past --max-body-bytes is a 413, headers past --max-header-bytes a 431, a chat template past
// --template-max-steps / --template-max-output-bytes and a grammar past
// --grammar-max-positions a 400 naming the limit, and a client that stops sending mid-request
// is dropped after --http-read-timeout (a raw socket that sends half a request and waits).
// After each refusal the server still answers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/server_process.h"
#include "io/gguf_file.h"

namespace densa::testing {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A template whose evaluation steps grow with the number of messages and whose output is the
// messages' text, so one request passes and a longer one crosses each limit.
constexpr const char* kTemplate =
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% "
    "endif %}";

std::string write_template() {
  const std::filesystem::path p = child_log_path("limits-template") + ".jinja";
  std::ofstream(p) << kTemplate;
  return p.string();
}

std::string chat_body(int num_messages, size_t content_bytes) {
  json messages = json::array();
  for (int i = 0; i < num_messages; ++i) messages.push_back({{"role", "user"}, {"content", std::string(content_bytes, 'a')}});
  return json{{"messages", messages}, {"max_tokens", 2}, {"temperature", 0}}.dump();
}

class E2eResourceLimits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    template_path_ = new std::string(write_template());
    server_ = new ServerProcess({"--max-body-bytes", "64KiB", "--max-header-bytes", "2KiB", "--http-read-timeout",
                                 "1", "--template-max-steps", "400", "--template-max-output-bytes", "4KiB",
                                 "--grammar-max-positions", "64", "--chat-template", *template_path_});
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->stop(), 0) << server_->log();
    delete server_;
    server_ = nullptr;
    std::filesystem::remove(*template_path_);
    delete template_path_;
  }
  void SetUp() override { ASSERT_TRUE(server_->wait_ready()); }

  static void expect_still_serving() {
    const CurlResponse ok = server_->post("/v1/completions", R"({"prompt":"Once","max_tokens":2,"temperature":0})");
    EXPECT_EQ(ok.status, 200) << ok.body;
  }

  static ServerProcess* server_;
  static std::string* template_path_;
};

ServerProcess* E2eResourceLimits::server_ = nullptr;
std::string* E2eResourceLimits::template_path_ = nullptr;

TEST_F(E2eResourceLimits, BodyPastMaxBodyBytesIs413) {
  const std::string prompt(60 << 10, 'a');  // under 64 KiB with the JSON around it
  const CurlResponse fits =
      server_->post("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 1}, {"user", prompt}}.dump());
  EXPECT_EQ(fits.status, 200) << fits.body;
  const std::string big = json{{"prompt", "Once"}, {"max_tokens", 1}, {"user", std::string(70 << 10, 'a')}}.dump();
  const CurlResponse r = server_->post("/v1/completions", big);
  EXPECT_EQ(r.status, 413) << r.body;
  ASSERT_TRUE(json::accept(r.body)) << r.body;
  const json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["code"], "request_too_large");
  EXPECT_NE(e["message"].get<std::string>().find("65536 bytes"), std::string::npos) << r.body;
  EXPECT_NE(e["message"].get<std::string>().find("--max-body-bytes"), std::string::npos) << r.body;
  // A chunked body (no Content-Length, which httplib would read whole whatever its size) is
  // refused before it is read.
  const std::filesystem::path file = child_log_path("limits-body") + ".json";
  std::ofstream(file) << big;
  const CurlResponse chunked =
      server_->curl("POST", "/v1/completions", "",
                    "-H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' --data-binary @" +
                        shell_quote(file.string()));
  std::filesystem::remove(file);
  EXPECT_EQ(chunked.status, 411) << chunked.body;
  ASSERT_TRUE(json::accept(chunked.body)) << chunked.body;
  EXPECT_EQ(json::parse(chunked.body)["error"]["code"], "length_required");
  expect_still_serving();
}

TEST_F(E2eResourceLimits, HeadersPastMaxHeaderBytesAre431) {
  const CurlResponse fits = server_->get("/v1/models", "-H 'X-Pad: " + std::string(1000, 'p') + "'");
  EXPECT_EQ(fits.status, 200) << fits.body;
  const CurlResponse r = server_->get("/v1/models", "-H 'X-Pad: " + std::string(3000, 'p') + "'");
  EXPECT_EQ(r.status, 431) << r.body;
  ASSERT_TRUE(json::accept(r.body)) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "request_header_fields_too_large");
  EXPECT_NE(r.body.find("--max-header-bytes"), std::string::npos) << r.body;
  // Many small headers count together.
  std::string many;
  for (int i = 0; i < 40; ++i) many += " -H 'X-Pad-" + std::to_string(i) + ": " + std::string(80, 'p') + "'";
  EXPECT_EQ(server_->get("/health", many).status, 431);
  expect_still_serving();
}

TEST_F(E2eResourceLimits, TemplateStepAndOutputLimitsAre400) {
  const CurlResponse fits = server_->post("/v1/chat/completions", chat_body(2, 10));
  EXPECT_EQ(fits.status, 200) << fits.body;
  const CurlResponse steps = server_->post("/v1/chat/completions", chat_body(100, 1));
  EXPECT_EQ(steps.status, 400) << steps.body;
  EXPECT_NE(steps.body.find("step limit (400 steps)"), std::string::npos) << steps.body;
  EXPECT_EQ(json::parse(steps.body)["error"]["param"], "messages");
  const CurlResponse out = server_->post("/v1/chat/completions", chat_body(1, 5000));
  EXPECT_EQ(out.status, 400) << out.body;
  EXPECT_NE(out.body.find("size limit (4096 bytes)"), std::string::npos) << out.body;
  expect_still_serving();
}

TEST_F(E2eResourceLimits, GrammarPastMaxPositionsIs400) {
  json small = json::parse(chat_body(1, 4));
  small["response_format"] = {{"type", "json_schema"},
                              {"json_schema", {{"name", "b"}, {"schema", {{"type", "boolean"}}}}}};
  const CurlResponse fits = server_->post("/v1/chat/completions", small.dump());
  EXPECT_EQ(fits.status, 200) << fits.body;
  json big = small;
  big["response_format"]["json_schema"]["schema"] = {{"type", "string"}, {"maxLength", 400}};
  const CurlResponse r = server_->post("/v1/chat/completions", big.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("(limit 64)"), std::string::npos) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "response_format");
  expect_still_serving();
}

// Connects to the server, sends `head`, and waits (up to `wait`) for the server to give up on
// it: the first byte of an answer or the connection closed. Returns how long that took
// (wait + 1 s if neither came) and what the server sent until it closed.
std::pair<std::chrono::milliseconds, std::string> send_and_wait_for_close(int port, const std::string& head,
                                                                         std::chrono::seconds wait) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  const Clock::time_point begin = Clock::now();
  const Clock::time_point deadline = begin + wait;
  std::string got;
  bool closed = false;
  std::optional<Clock::time_point> answered;
  while (!closed && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 1))) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (!answered) answered = Clock::now();
    if (n <= 0) closed = true;
    else got.append(buf, static_cast<size_t>(n));
  }
  const auto took = answered ? std::chrono::duration_cast<std::chrono::milliseconds>(*answered - begin)
                             : std::chrono::duration_cast<std::chrono::milliseconds>(wait + std::chrono::seconds(1));
  EXPECT_TRUE(closed) << "the server kept the connection of a client that stopped sending";
  close(fd);
  return {took, got};
}

TEST_F(E2eResourceLimits, SlowClientIsDroppedAfterReadTimeout) {
  // Half the headers, then silence: answered 400 and dropped after about --http-read-timeout 1
  // (httplib's own default would wait 5 s, and a server without a read timeout forever).
  const auto [headers_took, headers_got] =
      send_and_wait_for_close(server_->port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\n", std::chrono::seconds(8));
  EXPECT_GE(headers_took.count(), 800) << "closed before the timeout";
  EXPECT_LT(headers_took.count(), 3000) << "a client that stopped mid-headers held its connection; got: "
                                        << headers_got;
  // Whole headers and half the body they announce: the same.
  const auto [body_took, body_got] = send_and_wait_for_close(
      server_->port(),
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
      "{\"prompt\":",
      std::chrono::seconds(8));
  EXPECT_GE(body_took.count(), 800) << "closed before the timeout";
  EXPECT_LT(body_took.count(), 3000) << "a client that stopped mid-body held its connection; got: " << body_got;
  EXPECT_NE(headers_got.find("400"), std::string::npos) << headers_got;
  EXPECT_NE(headers_got.find("bad_http_request"), std::string::npos) << headers_got;
  expect_still_serving();
}

// A copy of the MoE fixture whose token `poisoned` has a NaN embedding row, written byte for
// byte into the GGUF's tensor data; every sequence holding that token computes NaN logits.
std::string write_poisoned_fixture(int64_t poisoned) {
  const std::string path = child_log_path("nan-model") + ".gguf";
  std::filesystem::copy_file(fixture_model_path(), path, std::filesystem::copy_options::overwrite_existing);
  Result<GgufFile> f = GgufFile::open(fixture_model_path());
  EXPECT_TRUE(f.is_ok()) << f.status().to_string();
  const GgufTensorInfo* info = f->tensor_info("token_embd.weight");
  EXPECT_NE(info, nullptr);
  EXPECT_NE(f->tensor_info("output.weight"), nullptr) << "the LM head must not be tied to the embeddings";
  EXPECT_TRUE(info->ggml_type == 0 || info->ggml_type == 1) << "f32 or f16 embeddings";
  const int64_t hidden = info->ne[0];
  const int64_t elem = info->ggml_type == 0 ? 4 : 2;
  std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
  out.seekp(static_cast<std::streamoff>(f->data_offset() + info->offset + poisoned * hidden * elem));
  for (int64_t c = 0; c < hidden; ++c) {
    if (elem == 4) out.write("\x00\x00\xc0\x7f", 4);  // f32 quiet NaN, little-endian
    else out.write("\x00\x7e", 2);                  // f16 quiet NaN
  }
  return path;
}

TEST(E2eRefusals, NonFiniteLogitsFailTheRequestAndAreCounted) {
  const std::string model = write_poisoned_fixture(500);
  ServerProcess server({"--served-model-name", "nan"}, model);
  ASSERT_TRUE(server.wait_ready());
  const CurlResponse clean = server.post("/v1/completions", R"({"prompt":[1,300,301],"max_tokens":4,"temperature":0})");
  EXPECT_EQ(clean.status, 200) << clean.body;
  const CurlResponse bad = server.post("/v1/completions", R"({"prompt":[1,300,500],"max_tokens":4,"temperature":0.7})");
  EXPECT_EQ(bad.status, 500) << bad.body;
  EXPECT_NE(bad.body.find("non-finite logits"), std::string::npos) << bad.body;
  EXPECT_NE(bad.body.find("in a batch of 1 sequences"), std::string::npos) << bad.body;
  // Streamed: the error arrives as the stream's last event, after no token.
  const CurlResponse stream =
      server.post("/v1/completions", R"({"prompt":[1,500],"max_tokens":4,"stream":true})");
  EXPECT_NE(stream.body.find("non-finite logits"), std::string::npos) << stream.body;
  EXPECT_EQ(stream.body.find("\"text\""), std::string::npos) << "a token was sent: " << stream.body;
  const CurlResponse metrics = server.get("/metrics");
  EXPECT_NE(metrics.body.find("densa_nonfinite_logits_total 2\n"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("densa_kv_integrity_violations_total 0\n"), std::string::npos) << metrics.body;
  // The clean prompt still answers as before the refusals.
  const CurlResponse again = server.post("/v1/completions", R"({"prompt":[1,300,301],"max_tokens":4,"temperature":0})");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(json::parse(again.body)["choices"][0]["text"], json::parse(clean.body)["choices"][0]["text"]);
  EXPECT_EQ(server.get("/health?audit=1").status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
  std::filesystem::remove(model);
}

}  // namespace
}  // namespace densa::testing
