// End-to-end: the real `densa serve` on the MoE fixture, driven over HTTP with curl.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <future>
#include <regex>
#include <memory>

#include "e2e/server_process.h"
#include "kernels/matmul.h"
#include "test_util.h"

namespace densa::testing {
namespace {

using nlohmann::json;

json golden_prompt(int idx) {
  return read_json(model_dir("tinystories-mixtral-3.6m") / "golden" / "golden.json")["prompts"][idx];
}

// Text of the streamed choices of a completions / chat SSE body; checks the SSE framing.
std::string streamed_text(const std::string& body, bool chat, std::string* finish = nullptr) {
  const auto payloads = sse_payloads(body);
  EXPECT_FALSE(payloads.empty());
  if (payloads.empty()) return {};
  EXPECT_EQ(payloads.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const json c = json::parse(payloads[i]);
    EXPECT_FALSE(c.contains("error")) << payloads[i];
    for (const json& ch : c["choices"]) {
      if (chat && ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
      if (!chat) text += ch["text"].get<std::string>();
      if (finish && !ch["finish_reason"].is_null()) *finish = ch["finish_reason"];
    }
  }
  return text;
}

// The value of an unlabelled Prometheus sample.
double metric_value(const std::string& text, const std::string& name) {
  const size_t pos = text.find("\n" + name + " ");
  return pos == std::string::npos ? -1.0 : std::atof(text.c_str() + pos + name.size() + 2);
}

class E2eCurl : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"--served-model-name", "tiny-moe", "--max-running-requests", "32"});
    ready_ = server_->wait_ready();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->stop(), 0) << "densa serve did not exit cleanly on SIGTERM:\n" << server_->log();
    delete server_;
  }
  void SetUp() override { ASSERT_TRUE(ready_); }

  static std::string completion(const std::string& body) {
    const CurlResponse r = server_->post("/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return {};
    return json::parse(r.body)["choices"][0]["text"];
  }
  static void expect_idle_and_audit_clean() {
    json h;
    for (int i = 0; i < 300; ++i) {
      h = json::parse(server_->get("/health").body);
      if (h["requests_running"] == 0 && h["requests_waiting"] == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(h["requests_running"], 0);
    EXPECT_EQ(h["requests_waiting"], 0);
    const CurlResponse audit = server_->get("/health?audit=1");
    EXPECT_EQ(audit.status, 200) << audit.body;
    EXPECT_EQ(json::parse(audit.body)["audit"], "ok") << audit.body;
  }

  static ServerProcess* server_;
  static bool ready_;
};
ServerProcess* E2eCurl::server_ = nullptr;
bool E2eCurl::ready_ = false;

TEST_F(E2eCurl, GreedyCompletionEqualsGoldenAndGenerate) {
  const json g = golden_prompt(0);
  const std::string prompt = g["prompt"];
  const std::string want = g["continuation_text"];
  const json req = {{"model", "tiny-moe"}, {"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}};
  const CurlResponse r = server_->post("/v1/completions", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["choices"][0]["text"], want);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], g["prompt_ids"].size());
  EXPECT_EQ(body["usage"]["completion_tokens"], 48);
  EXPECT_EQ(body["usage"]["total_tokens"], g["prompt_ids"].size() + 48);
  EXPECT_TRUE(body["usage"]["prompt_tokens_details"]["cached_tokens"].is_number());

  // The same prompt as golden token ids.
  json ids_req = req;
  ids_req["prompt"] = g["prompt_ids"];
  EXPECT_EQ(completion(ids_req.dump()), want);

  // `densa generate` prints prompt + continuation.
  const std::string generated = run_command(std::string(DENSA_BINARY) + " generate -m " +
                                            shell_quote(fixture_model_path()) + " -p " + shell_quote(prompt) +
                                            " -n 48 -t 2 2>/dev/null");
  EXPECT_EQ(generated, prompt + want + "\n");
}

TEST_F(E2eCurl, StreamingCompletionEqualsNonStreaming) {
  const json g = golden_prompt(1);
  const json req = {{"prompt", g["prompt"]}, {"max_tokens", 48}, {"temperature", 0}, {"stream", true},
                    {"stream_options", {{"include_usage", true}}}};
  const CurlResponse r = server_->post("/v1/completions", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.headers.find("text/event-stream"), std::string::npos) << r.headers;
  std::string finish;
  EXPECT_EQ(streamed_text(r.body, false, &finish), g["continuation_text"]);
  EXPECT_EQ(finish, "length");
  const auto payloads = sse_payloads(r.body);
  ASSERT_GE(payloads.size(), 2u);
  const json usage = json::parse(payloads[payloads.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 48);
}

TEST_F(E2eCurl, ChatStreamingAndNot) {
  const json req = {{"model", "tiny-moe"},
                    {"messages", {{{"role", "system"}, {"content", "Tell stories."}},
                                  {{"role", "user"}, {"content", "Once upon a time"}}}},
                    {"max_tokens", 24},
                    {"temperature", 0}};
  const CurlResponse r = server_->post("/v1/chat/completions", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  const std::string text = body["choices"][0]["message"]["content"];
  EXPECT_FALSE(text.empty());
  // The plain fallback template, sent as a completion, gives the same text (minus the stop cut).
  const std::string plain = completion(
      json{{"prompt", "System: Tell stories.\nUser: Once upon a time\nAssistant:"}, {"max_tokens", 24}, {"temperature", 0}}
          .dump());
  EXPECT_EQ(plain.substr(0, text.size()), text);

  json stream_req = req;
  stream_req["stream"] = true;
  const CurlResponse s = server_->post("/v1/chat/completions", stream_req.dump());
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(json::parse(sse_payloads(s.body)[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(streamed_text(s.body, true), text);
}

TEST_F(E2eCurl, StopStringsLogprobsEchoN) {
  const json g = golden_prompt(0);
  // continuation: " She loved to play outside in the sunshine. One day, ..."
  const json req = {{"prompt", g["prompt"]}, {"max_tokens", 48}, {"temperature", 0}, {"stop", {" outside", "zzz"}},
                    {"logprobs", 2}, {"echo", true}, {"n", 2}};
  const CurlResponse r = server_->post("/v1/completions", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  ASSERT_EQ(body["choices"].size(), 2u);
  for (const json& c : body["choices"]) {
    EXPECT_EQ(c["text"], g["prompt"].get<std::string>() + " She loved to play");
    EXPECT_EQ(c["finish_reason"], "stop");
    ASSERT_GE(c["logprobs"]["tokens"].size(), 4u);
    EXPECT_EQ(c["logprobs"]["tokens"][0], " She");
    EXPECT_LE(c["logprobs"]["token_logprobs"][0].get<double>(), 0.0);
    EXPECT_EQ(c["logprobs"]["top_logprobs"][0].size(), 2u);
  }
  // Streaming with a stop string: same text, cut.
  json s = {{"prompt", g["prompt"]}, {"max_tokens", 48}, {"temperature", 0}, {"stop", " outside"}, {"stream", true}};
  std::string finish;
  EXPECT_EQ(streamed_text(server_->post("/v1/completions", s.dump()).body, false, &finish), " She loved to play");
  EXPECT_EQ(finish, "stop");
  expect_idle_and_audit_clean();
}

TEST_F(E2eCurl, BadInputsGetDocumentedStatusAndNextRequestSucceeds) {
  struct Case {
    const char* path;
    std::string body;
    int status;
    const char* param;
    const char* code;
  };
  std::string too_long = "[1";
  for (int i = 0; i < 300; ++i) too_long += ",300";
  too_long += "]";
  const Case cases[] = {
      {"/v1/completions", "{not json", 400, nullptr, nullptr},
      {"/v1/completions", R"({"prompt":"x","max_tokens":"many"})", 400, "max_tokens", nullptr},
      {"/v1/completions", R"({"prompt":"x","max_tokens":-1})", 400, "max_tokens", nullptr},
      {"/v1/completions", R"({"prompt":"x","max_tokens":255})", 400, "max_tokens", "context_length_exceeded"},
      {"/v1/completions", R"({"prompt":)" + too_long + "}", 400, "prompt", "context_length_exceeded"},
      {"/v1/completions", R"({"prompt":{"a":1}})", 400, "prompt", nullptr},
      {"/v1/completions", R"({"prompt":"x","temperature":"warm"})", 400, "temperature", nullptr},
      {"/v1/completions", R"({"prompt":"x","model":"no-such-model"})", 404, "model", "model_not_found"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user"}]})", 400, "messages", nullptr},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"n":"2"})", 400, "n", nullptr},
  };
  for (const Case& c : cases) {
    const CurlResponse r = server_->post(c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    const json e = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(e.is_object() && e.contains("error")) << r.body;
    EXPECT_TRUE(e["error"]["message"].is_string());
    EXPECT_TRUE(e["error"]["type"].is_string());
    EXPECT_TRUE(e["error"].contains("param") && e["error"].contains("code"));
    if (c.param) {
      EXPECT_EQ(e["error"]["param"], c.param) << c.body;
    }
    if (c.code) {
      EXPECT_EQ(e["error"]["code"], c.code) << c.body;
    }
    EXPECT_FALSE(completion(R"({"prompt":"Once","max_tokens":4,"temperature":0})").empty()) << "after " << c.body;
  }
  EXPECT_EQ(server_->get("/v1/nowhere").status, 404);
}

TEST_F(E2eCurl, ClientDisconnectMidStreamCancels) {
  // 16 choices x 240 tokens in one stream; the client reads three chunks and hangs up.
  const double before = metric_value(server_->get("/metrics").body, "densa_generation_tokens_total");
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 240}, {"temperature", 0}, {"n", 16},
                    {"stream", true}, {"ignore_eos", true}};
  httplib::Client client("127.0.0.1", server_->port());
  httplib::Request hreq;
  hreq.method = "POST";
  hreq.path = "/v1/completions";
  hreq.body = req.dump();
  hreq.set_header("Content-Type", "application/json");
  int chunks = 0;
  hreq.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  client.send(hreq);
  EXPECT_EQ(chunks, 3);
  expect_idle_and_audit_clean();
  const double after = metric_value(server_->get("/metrics").body, "densa_generation_tokens_total");
  EXPECT_LT(after - before, 16 * 240) << "the requests ran to the end instead of being cancelled";
  EXPECT_FALSE(completion(R"({"prompt":"Once","max_tokens":4,"temperature":0})").empty());
}

TEST_F(E2eCurl, ConcurrentStreamsEqualOneAtATime) {
  // Mixed prompts and lengths; the greedy output of each must not depend on the batch.
  std::vector<json> reqs;
  const std::vector<std::string> prompts = {"Once upon a time", "Tom had a red ball.", "The cat sat on the mat and",
                                            "Lily and Ben went to the park. They", "One day, a little bird"};
  for (int i = 0; i < 24; ++i)
    reqs.push_back({{"prompt", prompts[i % prompts.size()] + std::string(i / 5, '!')},
                    {"max_tokens", 8 + (i * 7) % 40},
                    {"temperature", 0},
                    {"stream", true}});
  std::vector<std::string> alone;
  for (const json& r : reqs) alone.push_back(streamed_text(server_->post("/v1/completions", r.dump()).body, false));
  std::vector<std::future<std::string>> together;
  for (const json& r : reqs)
    together.push_back(std::async(std::launch::async, [r] {
      return streamed_text(server_->post("/v1/completions", r.dump()).body, false);
    }));
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i].get(), alone[i]) << reqs[i].dump();
  expect_idle_and_audit_clean();
}

TEST_F(E2eCurl, ModelsHealthMetrics) {
  const json models = json::parse(server_->get("/v1/models").body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "tiny-moe");
  ASSERT_FALSE(completion(R"({"prompt":"Once","max_tokens":4,"temperature":0})").empty());
  const CurlResponse m = server_->get("/metrics");
  ASSERT_EQ(m.status, 200);
  for (const char* name :
       {"densa_requests_running ", "densa_requests_waiting ", "densa_kv_pages_used ", "densa_kv_pages_total ",
        "densa_prefix_cache_hit_tokens_total ", "densa_prompt_tokens_total ", "densa_generation_tokens_total ",
        "densa_time_to_first_token_seconds_bucket{le=", "densa_time_per_output_token_seconds_sum ",
        "densa_e2e_request_latency_seconds_count "})
    EXPECT_NE(m.body.find(name), std::string::npos) << name;
  EXPECT_EQ(m.body.find("densa_generation_tokens_total 0\n"), std::string::npos);
}

// --lm-head-dtype reaches the served model: the start-up log names the head's format, and the
// greedy text equals `densa generate` with the same weight flags (both F32 KV) and the layout
// the server chose (matmul_int4_layout), named by --int4-layout: one arithmetic in both
// processes. (Against --int4-layout rows the text can differ: below AVX-512 the row-major
// matrices run the exact fallback, fp32 activations, where the tiles round x to int8.)
TEST(E2eLmHead, QuantizedHeadServesWhatGenerateGenerates) {
  const std::vector<std::string> flags = {"--weight-dtype", "int4", "--weight-group-size", "32",
                                          "--lm-head-dtype", "int4", "--kv-dtype", "f32"};
  ServerProcess server(flags);
  ASSERT_TRUE(server.wait_ready());
  const WeightLayout int4 = matmul_int4_layout();
  const std::string layout_name = int4 == WeightLayout::kInt4Tiles16  ? "tiles16"
                                  : int4 == WeightLayout::kInt4Tiles8 ? "tiles8"
                                                                      : "rows";
  const std::string body = int4 == WeightLayout::kInt4Tiles16 ? "int4-g32 in 16-row tiles"
                           : int4 == WeightLayout::kInt4Tiles8 ? "int4-g32 in 8-row tiles"
                                                               : "int4-g32";
  EXPECT_NE(server.log().find("densa serve: weights " + body + ", lm_head int4-g32\n"), std::string::npos)
      << server.log();
  // The quantized matrices sit in the weight arena, and the log says how much and the THP mode.
  const std::string log = server.log();
  std::smatch arena;
  const std::regex re(R"(densa serve: (\d+) MiB of weights in the huge-page arena \(transparent huge pages: (\w+))");
  ASSERT_TRUE(std::regex_search(log, arena, re)) << log;
  EXPECT_GT(std::stoi(arena[1].str()), 0);
  const std::string prompt = golden_prompt(1)["prompt"];
  const json req = {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}};
  const CurlResponse r = server.post("/v1/completions", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string text = json::parse(r.body)["choices"][0]["text"];
  EXPECT_FALSE(text.empty());
  const std::string generated =
      run_command(std::string(DENSA_BINARY) + " generate -m " + shell_quote(fixture_model_path()) + " -p " +
                  shell_quote(prompt) + " -n 24 -t 2 --weight-dtype int4 --weight-group-size 32 --lm-head-dtype int4 "
                  "--int4-layout " + layout_name + " 2>/dev/null");
  EXPECT_EQ(generated, prompt + text + "\n");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A second server: API key, one running request, a queue of one, and a KV pool of 128 tokens.
// A port a densa server holds is refused to a second one (serve or router), with a clear error,
// and the first keeps answering. Under httplib's default SO_REUSEPORT the second started and
// the kernel split connections between the two (bind_port_exclusively).
TEST(E2eLimits, SecondServerOnAHeldPortIsRefused) {
  ServerProcess server({});
  ASSERT_TRUE(server.wait_ready());
  const std::string port = std::to_string(server.port());
  int code = 0;
  const std::string serve = run_command("timeout 60 " + std::string(DENSA_BINARY) + " serve -m " +
                                            shell_quote(fixture_model_path()) + " --port " + port + " 2>&1",
                                        &code);
  EXPECT_NE(code, 0) << serve;
  EXPECT_NE(code, 124) << "the second server ran until the timeout: " << serve;
  EXPECT_NE(serve.find("cannot listen on 127.0.0.1:" + port), std::string::npos) << serve;
  const std::string router = run_command("timeout 60 " + std::string(DENSA_BINARY) + " router --prefill " +
                                             server.url("") + " --decode " + server.url("") + " --port " + port +
                                             " 2>&1",
                                         &code);
  EXPECT_NE(code, 0) << router;
  EXPECT_NE(code, 124) << "the router ran until the timeout: " << router;
  EXPECT_NE(router.find("cannot listen on 127.0.0.1:" + port), std::string::npos) << router;
  EXPECT_EQ(server.get("/health").status, 200);
}

TEST(E2eLimits, AuthQueueFullAndPoolLimit) {
  ServerProcess server({"--api-key", "k3y", "--max-running-requests", "1", "--max-queue", "1",
                        "--kv-cache-memory", "128KiB", "--page-size", "16"});
  ASSERT_TRUE(server.wait_ready());
  const std::string auth = "-H 'Authorization: Bearer k3y'";
  const std::string small = R"({"prompt":"Once","max_tokens":4,"temperature":0})";

  const CurlResponse no_key = server.post("/v1/completions", small);
  EXPECT_EQ(no_key.status, 401);
  EXPECT_EQ(json::parse(no_key.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(server.post("/v1/completions", small, "-H 'Authorization: Bearer wrong'").status, 401);
  EXPECT_EQ(server.post("/v1/completions", small, auth).status, 200);
  EXPECT_EQ(server.get("/health").status, 200);

  // 40 tokens of prompt + 100 > 128 pool tokens (context is 256).
  std::string ids = "[1";
  for (int i = 0; i < 39; ++i) ids += ",300";
  const CurlResponse pool = server.post("/v1/completions", R"({"prompt":)" + ids + R"(],"max_tokens":100})", auth);
  EXPECT_EQ(pool.status, 400) << pool.body;
  EXPECT_EQ(server.post("/v1/completions", small, auth).status, 200);

  // Eight concurrent long requests: one runs, one waits, the rest are refused with 429.
  const std::string long_req = R"({"prompt":"Once upon a time","max_tokens":100,"temperature":0,"ignore_eos":true})";
  std::vector<std::future<CurlResponse>> burst;
  for (int i = 0; i < 8; ++i)
    burst.push_back(std::async(std::launch::async, [&] { return server.post("/v1/completions", long_req, auth); }));
  int ok = 0, limited = 0;
  for (auto& f : burst) {
    const CurlResponse r = f.get();
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++limited;
      EXPECT_NE(r.headers.find("Retry-After:"), std::string::npos) << r.headers;
      EXPECT_EQ(json::parse(r.body)["error"]["type"], "rate_limit_error");
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(limited, 1);
  EXPECT_EQ(ok + limited, 8);
  EXPECT_EQ(server.post("/v1/completions", small, auth).status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace densa::testing
