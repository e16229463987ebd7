// HttpServer in process, over real sockets, on a ScriptedEngine (deterministic tokens): the
// OpenAI shapes, SSE, stop strings, the error table, auth, 429 and disconnect -> cancel.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "model/model_loader.h"
#include "server/scripted_engine.h"
#include "test_util.h"

namespace densa::server {
namespace {

using nlohmann::json;
using densa::testing::ScriptedEngine;

const ModelWeights& weights() {
  static const ModelWeights* w = [] {
    auto loaded = load_model(densa::testing::model_dir("tinystories-mixtral-3.6m") / "gguf" /
                             "tinystories-mixtral-3.6m-f16.gguf");
    CHECK(loaded.is_ok()) << loaded.status().to_string();
    return new ModelWeights(std::move(loaded).value());
  }();
  return *w;
}

// " She loved to play outside in the sun..." (golden greedy ids of prompt 0)
const std::vector<TokenId> kScript = {326, 462, 267, 362, 607, 315, 265, 625, 835, 790, 983, 405, 339, 989, 332};

class HttpServerTest : public ::testing::Test {
 protected:
  void start(int max_active = 64, std::string api_key = "") {
    engine_ = std::make_unique<ScriptedEngine>(kScript, max_active, 512);
    HttpServerConfig cfg;
    cfg.port = 0;
    cfg.api_key = std::move(api_key);
    cfg.served_model_name = "tiny";
    server_ = std::make_unique<HttpServer>(*engine_, weights(), cfg);
    ASSERT_TRUE(server_->bind().is_ok());
    thread_ = std::thread([this] { server_->run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->bound_port());
    client_->set_read_timeout(30, 0);
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    if (engine_) engine_->shutdown();
  }
  httplib::Result post(const std::string& path, const std::string& body, httplib::Headers headers = {}) {
    return client_->Post(path.c_str(), headers, body, "application/json");
  }
  std::string continuation(const std::vector<TokenId>& prompt, size_t n) {
    const Tokenizer& tok = *weights().tokenizer;
    std::vector<TokenId> all = prompt;
    for (size_t i = 0; i < n; ++i) all.push_back(kScript[i % kScript.size()]);
    return tok.decode(all).substr(tok.decode(prompt).size());
  }
  // The "data:" payloads of an SSE body.
  static std::vector<std::string> sse_payloads(const std::string& body) {
    std::vector<std::string> out;
    size_t pos = 0;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
      const size_t end = body.find("\n\n", pos);
      out.push_back(body.substr(pos + 6, end - pos - 6));
      pos = end;
    }
    return out;
  }
  void expect_ok_after() {
    auto r = post("/v1/completions", R"({"prompt":"Once","max_tokens":3,"temperature":0})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }

  std::unique_ptr<ScriptedEngine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, CompletionNonStreaming) {
  start();
  auto r = post("/v1/completions", R"({"model":"tiny","prompt":"Once upon a time","max_tokens":6,"temperature":0})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "tiny");
  const auto prompt = weights().tokenizer->encode("Once upon a time", true);
  EXPECT_EQ(body["choices"][0]["text"], continuation(prompt, 6));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);
  EXPECT_EQ(body["usage"]["total_tokens"], prompt.size() + 6);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(engine_->last_request().sampling.temperature, 0.0f);
}

TEST_F(HttpServerTest, CompletionStreamingEqualsNonStreaming) {
  start();
  auto r = post("/v1/completions",
                R"({"prompt":[1,396,417],"max_tokens":8,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto payloads = sse_payloads(r->body);
  ASSERT_GE(payloads.size(), 3u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < payloads.size(); ++i) {
    const json c = json::parse(payloads[i]);
    EXPECT_TRUE(c["usage"].is_null());
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, continuation({1, 396, 417}, 8));
  EXPECT_EQ(finish, "length");
  const json usage = json::parse(payloads[payloads.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 8);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 3);
}

TEST_F(HttpServerTest, ChatStreamingAndNot) {
  start();
  const std::string req = R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"logprobs":true,"top_logprobs":2)";
  auto r = post("/v1/chat/completions", req + "}");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  const std::string text = body["choices"][0]["message"]["content"];
  const auto& content = body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u);
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.5f);
  // The plain fallback template (the fixture has none).
  const auto prompt = weights().tokenizer->encode("User: Hi\nAssistant:", true);
  EXPECT_EQ(engine_->last_request().prompt, prompt);
  EXPECT_EQ(text, continuation(prompt, 5));

  auto s = post("/v1/chat/completions", req + R"(,"stream":true})");
  ASSERT_TRUE(s);
  const auto payloads = sse_payloads(s->body);
  ASSERT_GE(payloads.size(), 3u);
  EXPECT_EQ(json::parse(payloads[0])["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const json d = json::parse(payloads[i])["choices"][0]["delta"];
    if (d.contains("content")) streamed += d["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, text);
}

TEST_F(HttpServerTest, StopStringCutsTextAndCancels) {
  start();
  // Script text: " She loved to play outside in the sunshine. One day, she"
  auto r = post("/v1/completions", R"({"prompt":"x","max_tokens":15,"stop":[" outside"],"echo":true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["choices"][0]["text"], "x She loved to play");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  for (int i = 0; i < 200 && engine_->stats().num_running > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(engine_->num_cancelled(), 1);
}

TEST_F(HttpServerTest, NChoicesAndPromptList) {
  start();
  auto r = post("/v1/completions", R"({"prompt":["a","b"],"n":2,"max_tokens":2,"seed":3})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  ASSERT_EQ(body["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(body["choices"][i]["index"], i);
  EXPECT_EQ(engine_->num_submitted(), 4);
  EXPECT_EQ(body["usage"]["completion_tokens"], 8);
}

TEST_F(HttpServerTest, TokenizeAndDetokenizeRoundTrip) {
  start();
  const Tokenizer& tok = *weights().tokenizer;
  const std::string text = "Once upon a time, Lily saw a big dog.";
  auto r = post("/tokenize", json{{"prompt", text}, {"return_token_strs", true}}.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json t = json::parse(r->body);
  const std::vector<TokenId> want = tok.encode(text, true);
  EXPECT_EQ(t["tokens"].get<std::vector<TokenId>>(), want);
  EXPECT_EQ(t["count"], want.size());
  EXPECT_EQ(t["max_model_len"], weights().config.max_position_embeddings);
  ASSERT_EQ(t["token_strs"].size(), want.size());
  EXPECT_EQ(t["token_strs"][1], tok.token_bytes(want[1]));
  // Without special tokens: no BOS.
  auto plain = post("/tokenize", json{{"prompt", text}, {"add_special_tokens", false}, {"model", "tiny"}}.dump());
  ASSERT_TRUE(plain);
  EXPECT_EQ(json::parse(plain->body)["tokens"].get<std::vector<TokenId>>(), tok.encode(text, false));
  auto d = post("/detokenize", json{{"tokens", want}}.dump());
  ASSERT_TRUE(d);
  ASSERT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(json::parse(d->body)["prompt"], text);
}

TEST_F(HttpServerTest, BadInputsGetTheirStatusAndServerKeepsServing) {
  start();
  struct Case {
    const char* path;
    const char* body;
    int status;
    const char* param;  // nullptr: null
  };
  const Case cases[] = {
      {"/v1/completions", "{bad json", 400, nullptr},
      {"/v1/completions", R"({"prompt":"x","max_tokens":"ten"})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":0})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":100000})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","temperature":[1]})", 400, "temperature"},
      {"/v1/completions", R"({"prompt":[1,99999]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":"x","model":"gpt-4"})", 404, "model"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":7}]})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages":"x"})", 400, "messages"},
      {"/v1/completions", R"({"prompt":"x","mirostat":2})", 400, "mirostat"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
          "function":{"name":"f","parameters":{"type":"object"}}}]})", 400, "tools"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
          "json_schema":{"name":"n","schema":{"type":"object","patternProperties":{"a":{}}}}}})", 400, "response_format"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"regex","regex":"(a"}})",
       400, "response_format"},
      {"/tokenize", R"({"prompt":"x","truncate":true})", 400, "truncate"},
      {"/tokenize", R"({"prompt":7})", 400, "prompt"},
      {"/detokenize", R"({"tokens":[1,-5]})", 400, "tokens"},
      {"/detokenize", R"({"tokens":[1],"model":"other"})", 404, "model"},
  };
  for (const Case& c : cases) {
    auto r = post(c.path, c.body);
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, c.status) << c.body;
    const json e = json::parse(r->body)["error"];
    EXPECT_TRUE(e["message"].is_string()) << c.body;
    EXPECT_TRUE(e["type"].is_string()) << c.body;
    if (c.param) {
      EXPECT_EQ(e["param"], c.param) << c.body;
    } else {
      EXPECT_TRUE(e["param"].is_null()) << c.body;
    }
    expect_ok_after();
  }
  // A prompt longer than the context (512 here).
  std::string long_prompt = "[1";
  for (int i = 0; i < 600; ++i) long_prompt += ",300";
  auto r = post("/v1/completions", R"({"prompt":)" + long_prompt + "]}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
  expect_ok_after();
  auto unknown = client_->Get("/v1/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_TRUE(json::parse(unknown->body).contains("error"));
}

TEST_F(HttpServerTest, ApiKeyRequiredOnV1Only) {
  start(64, "sekrit");
  auto r = post("/v1/completions", R"({"prompt":"x","max_tokens":1})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "invalid_api_key");
  auto wrong = post("/v1/completions", R"({"prompt":"x","max_tokens":1})", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong->status, 401);
  auto ok = post("/v1/completions", R"({"prompt":"x","max_tokens":1})", {{"Authorization", "Bearer sekrit"}});
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(client_->Get("/health")->status, 200);
  EXPECT_EQ(client_->Get("/v1/models")->status, 401);
}

TEST_F(HttpServerTest, QueueFullIs429WithRetryAfter) {
  start(/*max_active=*/1);
  engine_->token_interval = std::chrono::milliseconds(20);
  std::thread busy([this] {
    httplib::Client c("127.0.0.1", server_->bound_port());
    c.Post("/v1/completions", R"({"prompt":"x","max_tokens":15})", "application/json");
  });
  while (engine_->stats().num_running == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto r = post("/v1/completions", R"({"prompt":"x","max_tokens":2})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "rate_limit_error");
  busy.join();
  engine_->token_interval = std::chrono::milliseconds(2);
  expect_ok_after();
}

TEST_F(HttpServerTest, ClientDisconnectMidStreamCancels) {
  start();
  engine_->token_interval = std::chrono::milliseconds(10);
  {
    httplib::Client c("127.0.0.1", server_->bound_port());
    int chunks = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = R"({"prompt":"x","max_tokens":200,"stream":true})";
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
    c.send(req);  // returns once the receiver says stop (the connection closes)
    EXPECT_GE(chunks, 3);
  }
  for (int i = 0; i < 500 && engine_->stats().num_running > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine_->stats().num_running, 0);
  EXPECT_EQ(engine_->num_cancelled(), 1);
  auto health = client_->Get("/health?audit=1");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << health->body;
  EXPECT_EQ(json::parse(health->body)["audit"], "ok");
}

TEST_F(HttpServerTest, ModelsHealthMetrics) {
  start();
  expect_ok_after();
  const json models = json::parse(client_->Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  const auto metrics = client_->Get("/metrics");
  ASSERT_EQ(metrics->status, 200);
  for (const char* name : {"densa_requests_running", "densa_requests_waiting", "densa_kv_pages_used",
                           "densa_kv_pages_total", "densa_prefix_cache_hit_tokens_total", "densa_prompt_tokens_total",
                           "densa_generation_tokens_total", "densa_time_to_first_token_seconds_bucket",
                           "densa_time_per_output_token_seconds_bucket", "densa_e2e_request_latency_seconds_count 1"})
    EXPECT_NE(metrics->body.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace densa::server
