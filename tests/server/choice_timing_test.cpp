// Per-request timing breakdown over real HTTP: an in-process HttpServer on the real engine and
// the MoE fixture, driven by httplib's client. Checks only consistency, never speed: every
// stage is there and >= 0, the stages add up to the server time, the server time fits inside
// the client's round trip, step counts match the request's shape, the Server-Timing header,
// the histograms of /metrics and the structured request log agree with the responses.
#include "server/choice_timing.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "engine/engine.h"
#include "model/model_loader.h"
#include "server/http_server.h"
#include "test_util.h"

namespace densa::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const ModelWeights& weights() {
  static const ModelWeights* w = [] {
    auto loaded = load_model(densa::testing::model_dir("tinystories-mixtral-3.6m") / "gguf" /
                             "tinystories-mixtral-3.6m-f16.gguf");
    CHECK(loaded.is_ok()) << loaded.status().to_string();
    return new ModelWeights(std::move(loaded).value());
  }();
  return *w;
}

constexpr int kChunk = 8;  // chunked prefill size: a prompt of P tokens takes ceil(P / 8) steps

// Scheduling slack: time the stages do not claim (between engine steps, HTTP framing, the
// loopback). Generous on purpose, the machine is shared; the assertions are about
// consistency (stages sum to the server time, which fits in the round trip), not speed.
double slack_ms(double total_ms) { return 0.5 * total_ms + 250.0; }

class ChoiceTimingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_path_ = std::filesystem::temp_directory_path() /
                ("densa-request-log-" + std::to_string(::getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count()) + ".jsonl");
    EngineConfig ec;
    ec.chunked_prefill_size = kChunk;
    ec.num_threads = 1;
    ec.enable_prefix_cache = false;  // every prompt token is prefilled: exact chunk counts
    engine_ = Engine::create(weights(), ec).value();
    HttpServerConfig cfg;
    cfg.port = 0;
    cfg.served_model_name = "tiny";
    cfg.request_log_path = log_path_.string();
    server_ = std::make_unique<HttpServer>(*engine_, weights(), cfg);
    ASSERT_TRUE(server_->bind().is_ok());
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    if (engine_) engine_->shutdown();
    std::filesystem::remove(log_path_);
  }
  std::unique_ptr<httplib::Client> client() {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server_->bound_port());
    c->set_read_timeout(60, 0);
    return c;
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::filesystem::path log_path_;
};

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// The checks every densa_timing object must pass; client_ms is the round trip the client saw.
void check_timing(const json& t, int prompt_tokens, int completion_tokens, double client_ms) {
  SCOPED_TRACE(t.dump());
  for (const char* k : {"tokenize_ms", "queue_ms", "prefill_ms", "kv_transfer_ms", "decode_ms", "engine_other_ms",
                        "respond_ms", "first_token_ms", "server_ms"}) {
    ASSERT_TRUE(t.contains(k)) << k;
    EXPECT_GE(t[k].get<double>(), 0.0) << k;
  }
  EXPECT_EQ(t["kv_transfer_ms"].get<double>(), 0.0);  // colocated
  // Shape: ceil(P / chunk) prefill steps; the first token comes from the last prefill step,
  // every later one from a decode step that fed the previous token.
  EXPECT_EQ(t["num_prefill_chunks"].get<int>(), ceil_div(prompt_tokens, kChunk));
  EXPECT_EQ(t["prefill_chunks_ms"].size(), t["num_prefill_chunks"].get<size_t>());
  EXPECT_EQ(t["num_decode_steps"].get<int>(), completion_tokens - 1);
  EXPECT_EQ(t["decode_steps_ms"].size(), t["num_decode_steps"].get<size_t>());
  double chunks = 0, steps = 0;
  for (double v : t["prefill_chunks_ms"]) chunks += v;
  for (double v : t["decode_steps_ms"]) steps += v;
  EXPECT_NEAR(chunks, t["prefill_ms"].get<double>(), 1e-6);
  EXPECT_NEAR(steps, t["decode_ms"].get<double>(), 1e-6);
  // The stages add up to the separately measured server time.
  const double server = t["server_ms"].get<double>();
  const double sum = t["tokenize_ms"].get<double>() + t["queue_ms"].get<double>() + t["prefill_ms"].get<double>() +
                     t["kv_transfer_ms"].get<double>() + t["decode_ms"].get<double>() +
                     t["engine_other_ms"].get<double>() + t["respond_ms"].get<double>();
  EXPECT_NEAR(sum, server, 0.01 + 1e-6 * server);
  // The unclaimed engine time is scheduling slack, not a hidden stage.
  EXPECT_LE(t["engine_other_ms"].get<double>(), slack_ms(server));
  // First token: after queue and prefill, before the end.
  EXPECT_GE(t["first_token_ms"].get<double>() + 1e-3, t["tokenize_ms"].get<double>() + t["queue_ms"].get<double>() +
                                                          t["prefill_ms"].get<double>());
  EXPECT_LE(t["first_token_ms"].get<double>(), server + 1e-3);
  // Server time fits in the client's round trip; the rest (network, HTTP) is small.
  EXPECT_LE(server, client_ms + 1e-3);
  EXPECT_LE(client_ms - server, slack_ms(client_ms));
}

// Parses "name;dur=X, ..." into name -> X.
std::map<std::string, double> parse_server_timing(const std::string& h) {
  std::map<std::string, double> out;
  const std::regex part(R"(([a-z_]+);dur=([0-9.]+))");
  for (auto it = std::sregex_iterator(h.begin(), h.end(), part); it != std::sregex_iterator(); ++it)
    out[(*it)[1]] = std::stod((*it)[2]);
  return out;
}

// Sum of a metric's samples whose line starts with `prefix` (name plus labels).
double metric(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  double sum = 0;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) sum += std::stod(line.substr(line.rfind(' ') + 1));
  return sum;
}

TEST_F(ChoiceTimingTest, BlockingResponseCarriesConsistentStagesAndServerTiming) {
  auto c = client();
  const std::string body =
      R"({"prompt":"Once upon a time, there was a little girl named Lily.","max_tokens":12,"temperature":0,"ignore_eos":true,"densa_timing":true})";
  const auto t0 = Clock::now();
  auto r = c->Post("/v1/completions", body, "application/json");
  const double client_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  const int prompt = j["usage"]["prompt_tokens"].get<int>();
  ASSERT_EQ(j["usage"]["completion_tokens"].get<int>(), 12);
  const json& t = j["choices"][0]["densa_timing"];
  check_timing(t, prompt, 12, client_ms);

  // Server-Timing: the same numbers (ms, 3 decimals).
  ASSERT_TRUE(r->has_header("Server-Timing"));
  const auto st = parse_server_timing(r->get_header_value("Server-Timing"));
  for (const char* k : {"tokenize", "queue", "prefill", "kv_transfer", "decode", "engine_other", "respond", "ttft", "total"})
    ASSERT_TRUE(st.count(k)) << k << " missing in " << r->get_header_value("Server-Timing");
  EXPECT_NEAR(st.at("total"), t["server_ms"].get<double>(), 1e-3);
  EXPECT_NEAR(st.at("decode"), t["decode_ms"].get<double>(), 1e-3);
  EXPECT_NEAR(st.at("ttft"), t["first_token_ms"].get<double>(), 1e-3);

  // Without the opt-in: no densa_timing field, the header stays.
  auto plain = c->Post("/v1/completions", R"({"prompt":"Once","max_tokens":3,"temperature":0})", "application/json");
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200);
  EXPECT_FALSE(json::parse(plain->body)["choices"][0].contains("densa_timing"));
  EXPECT_TRUE(plain->has_header("Server-Timing"));

  // A non-boolean opt-in is a 400 naming the field.
  auto bad = c->Post("/v1/completions", R"({"prompt":"Once","max_tokens":3,"densa_timing":"yes"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "densa_timing");
}

TEST_F(ChoiceTimingTest, ConcurrentStreamsFinalChunkCarriesStagesAndMetricsAndLogAgree) {
  constexpr int kClients = 4;
  const int max_tokens[kClients] = {5, 9, 14, 20};
  std::vector<json> timings(kClients);
  std::vector<int> prompts(kClients, 0), completions(kClients, 0);
  std::vector<double> client_ms(kClients, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = client();
      const json req = {{"prompt", std::string(static_cast<size_t>(i + 1), 'a') + " One day, Tom and his dog went to the park"},
                        {"max_tokens", max_tokens[i]},
                        {"temperature", 0},
                        {"ignore_eos", true},
                        {"stream", true},
                        {"stream_options", {{"include_usage", true}}},
                        {"densa_timing", true}};
      const auto t0 = Clock::now();
      auto r = c->Post("/v1/completions", req.dump(), "application/json");
      client_ms[i] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200);
      size_t pos = 0;
      while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
        const size_t end = r->body.find("\n\n", pos);
        const std::string payload = r->body.substr(pos + 6, end - pos - 6);
        pos = end;
        if (payload == "[DONE]") break;
        const json chunk = json::parse(payload);
        if (chunk.contains("usage") && !chunk["usage"].is_null()) {
          prompts[i] = chunk["usage"]["prompt_tokens"].get<int>();
          completions[i] = chunk["usage"]["completion_tokens"].get<int>();
        }
        if (chunk["choices"].empty()) continue;
        const json& ch = chunk["choices"][0];
        if (ch["finish_reason"].is_null()) {
          EXPECT_FALSE(ch.contains("densa_timing")) << "only the final chunk carries the timing";
        } else {
          ASSERT_TRUE(ch.contains("densa_timing"));
          timings[i] = ch["densa_timing"];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  int decode_steps = 0, prefill_chunks = 0;
  for (int i = 0; i < kClients; ++i) {
    ASSERT_EQ(completions[i], max_tokens[i]);
    ASSERT_FALSE(timings[i].is_null()) << "client " << i;
    check_timing(timings[i], prompts[i], completions[i], client_ms[i]);
    decode_steps += timings[i]["num_decode_steps"].get<int>();
    prefill_chunks += timings[i]["num_prefill_chunks"].get<int>();
  }

  // /metrics: one observation per choice per stage, one per chunk / step.
  auto m = client()->Get("/metrics");
  ASSERT_TRUE(m);
  for (const char* stage : {"tokenize", "queue", "prefill", "kv_transfer", "decode", "engine_other", "respond"})
    EXPECT_EQ(metric(m->body, std::string("densa_request_stage_seconds_count{stage=\"") + stage + "\"}"), kClients)
        << stage;
  EXPECT_EQ(metric(m->body, "densa_decode_step_seconds_count"), decode_steps);
  EXPECT_EQ(metric(m->body, "densa_prefill_chunk_seconds_count"), prefill_chunks);
  double decode_sum_ms = 0;
  for (const json& t : timings) decode_sum_ms += t["decode_ms"].get<double>();
  EXPECT_NEAR(metric(m->body, "densa_decode_step_seconds_sum") * 1000.0, decode_sum_ms, 1e-3 * kClients + 1e-6 * decode_sum_ms);

  // The request log: one JSON line per request with the same counts and stage times.
  std::ifstream in(log_path_);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    const json l = json::parse(line);
    ++lines;
    EXPECT_EQ(l["status"], 200);
    EXPECT_EQ(l["stream"], true);
    EXPECT_EQ(l["route"], "/v1/completions");
    const int ct = l["completion_tokens"].get<int>();
    const int i = static_cast<int>(std::find(std::begin(max_tokens), std::end(max_tokens), ct) - std::begin(max_tokens));
    ASSERT_LT(i, kClients) << line;
    EXPECT_EQ(l["prompt_tokens"].get<int>(), prompts[i]);
    ASSERT_EQ(l["choices"].size(), 1u);
    EXPECT_EQ(l["choices"][0]["finish_reason"], "length");
    EXPECT_NEAR(l["choices"][0]["timing"]["decode_ms"].get<double>(), timings[i]["decode_ms"].get<double>(), 1e-9);
  }
  EXPECT_EQ(lines, kClients);
}

}  // namespace
}  // namespace densa::server
