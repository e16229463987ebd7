// The KV integrity edge of the server, in process over real sockets: a violation reaches the
// client as HTTP 500 with code kv_integrity_violation (non-streaming) or as an SSE error event
// after the tokens already sent (streaming); /metrics exports the counter; the admin endpoint
// reads and switches the policy; the densa_kv_integrity request field parses.
#include "server/kv_integrity_admin.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <mutex>
#include <thread>

#include "api/openai_request.h"
#include "model/model_loader.h"
#include "server/http_server.h"
#include "test_util.h"

namespace densa::server {
namespace {

using nlohmann::json;

const ModelWeights& weights() {
  static const ModelWeights* w = [] {
    auto loaded = load_model(densa::testing::model_dir("tinystories-mixtral-3.6m") / "gguf" /
                             "tinystories-mixtral-3.6m-f16.gguf");
    CHECK(loaded.is_ok()) << loaded.status().to_string();
    return new ModelWeights(std::move(loaded).value());
  }();
  return *w;
}

// Every request emits two tokens, then fails the way the engine reports a violation.
class ViolatingEngine final : public Engine {
 public:
  Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_override = request.kv_integrity;
    auto s = std::make_shared<RequestStream>(RequestId(++next_id_));
    for (TokenId t : {326, 462}) {
      TokenEvent e;
      e.token = t;
      e.num_prompt_tokens = static_cast<int32_t>(request.prompt.size());
      s->push(std::move(e));
    }
    TokenEvent end;
    end.finish = FinishReason::kError;
    end.error = Status(StatusCode::kAborted, "kv_integrity_violation: request " + std::to_string(next_id_) +
                                                 ": page 3 (entry 0 of 2, 16 tokens): expected tag 0x00000001, "
                                                 "found 0x00000002; page history (oldest first): none");
    s->push(std::move(end));
    ++violations_;
    return s;
  }
  void cancel(RequestId) override {}
  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    EngineStats s;
    s.kv_integrity_violations = violations_;
    return s;
  }
  Status audit() override { return Status::ok(); }
  void shutdown() override {}
  Status set_kv_integrity(const KvIntegrityPolicy& p) override {
    std::lock_guard<std::mutex> lock(mu_);
    policy_ = p;
    return Status::ok();
  }
  std::optional<KvIntegrityPolicy> kv_integrity() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return policy_;
  }

  std::optional<bool> last_override;

 private:
  mutable std::mutex mu_;
  uint64_t next_id_ = 0;
  int64_t violations_ = 0;
  KvIntegrityPolicy policy_;
};

class KvIntegrityHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerConfig cfg;
    cfg.port = 0;
    cfg.served_model_name = "tiny";
    cfg.api_key = "k";
    server_ = std::make_unique<HttpServer>(engine_, weights(), cfg);
    ASSERT_TRUE(server_->bind().is_ok());
    thread_ = std::thread([this] { server_->run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->bound_port());
    client_->set_read_timeout(30, 0);
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
  }
  httplib::Result post(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), {{"Authorization", "Bearer k"}}, body, "application/json");
  }

  ViolatingEngine engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(KvIntegrityHttpTest, NonStreamingIs500WithCode) {
  auto r = post("/v1/completions", R"({"prompt":"Once","max_tokens":8,"temperature":0,"densa_kv_integrity":true})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["error"]["code"], "kv_integrity_violation");
  EXPECT_EQ(body["error"]["type"], "server_error");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("expected tag 0x00000001"), std::string::npos);
  EXPECT_EQ(engine_.last_override, std::optional<bool>(true));
}

TEST_F(KvIntegrityHttpTest, StreamingSendsTokensThenErrorEvent) {
  auto r = post("/v1/chat/completions",
                R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"stream":true,"densa_kv_integrity":false})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const size_t err = r->body.find("\"kv_integrity_violation\"");
  ASSERT_NE(err, std::string::npos) << r->body;
  EXPECT_LT(r->body.find("\"delta\""), err) << "tokens before the error";
  EXPECT_EQ(engine_.last_override, std::optional<bool>(false));
}

TEST_F(KvIntegrityHttpTest, MetricsAndAdminEndpoint) {
  ASSERT_TRUE(post("/v1/completions", R"({"prompt":"Once","max_tokens":4})"));
  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("densa_kv_integrity_violations_total 1\n"), std::string::npos) << m->body;

  auto g = client_->Get("/admin/kv-integrity", {{"Authorization", "Bearer k"}});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 200);
  EXPECT_EQ(json::parse(g->body)["mode"], "off");
  auto p = post("/admin/kv-integrity", R"({"mode":"sample=4"})");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 200) << p->body;
  EXPECT_EQ(engine_.kv_integrity(), (KvIntegrityPolicy{KvIntegrityMode::kTags, 4, 1}));
  auto bad = post("/admin/kv-integrity", R"({"mode":"sometimes"})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  auto noauth = client_->Post("/admin/kv-integrity", R"({"mode":"on"})", "application/json");
  ASSERT_TRUE(noauth);
  EXPECT_EQ(noauth->status, 401);
  EXPECT_EQ(engine_.kv_integrity()->sample_every, 4);
}

TEST(KvIntegrityPolicyText, ParseAndName) {
  for (const char* text : {"off", "on", "sample=7", "digest", "digest=16"}) {
    const Result<KvIntegrityPolicy> p = parse_kv_integrity_policy(text);
    ASSERT_TRUE(p.is_ok()) << text;
    EXPECT_EQ(kv_integrity_policy_name(*p), text);
  }
  for (const char* text : {"", "ON", "sample=", "sample=0", "sample=-1", "digest=x", "sample=3x"}) {
    EXPECT_EQ(parse_kv_integrity_policy(text).status().code(), StatusCode::kInvalidArgument) << text;
  }
  api::RequestError error;
  EXPECT_FALSE(api::parse_openai_request(api::ApiKind::kCompletion, R"({"prompt":"a"})", error)->kv_integrity.has_value());
  EXPECT_EQ(api::parse_openai_request(api::ApiKind::kCompletion, R"({"prompt":"a","densa_kv_integrity":false})", error)
                ->kv_integrity,
            std::optional<bool>(false));
  EXPECT_FALSE(api::parse_openai_request(api::ApiKind::kCompletion, R"({"prompt":"a","densa_kv_integrity":"yes"})", error));
  EXPECT_EQ(error.param, "densa_kv_integrity");
}

}  // namespace
}  // namespace densa::server
