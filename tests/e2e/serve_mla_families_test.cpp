// End-to-end: `densa serve` on the tiny checkpoints of the production families, GLM-5
// (glm_moe_dsa, MLA + DeepSeek Sparse Attention, index_topk 8), Kimi-K2.5 (kimi_k25, the
// deepseek_v3 reference re-wrapped) and GLM-4.7-Flash (glm4_moe_lite, likewise), with BF16 and
// FP8 KV, fp32 activations (--bf16-activations f32, as the golden logits), driven over HTTP
// with curl (each checkpoint with the shared SentencePiece tokenizer
// as its tokenizer.model; prompts are sent as token ids). The server runs 4-token pages and 5-token prefill chunks
// (so prompts of 12-40 tokens cross index_topk inside a chunk), the prefix cache on (each prompt
// is sent twice; the second time its full pages are cache hits) and DENSA_KV_AUDIT set (the
// page and radix-cache audit CHECKed after every step). Each greedy completion's tokens
// (logprobs.tokens) equal those of an in-process Engine with the same settings, and those
// follow the PyTorch golden greedy until a step whose golden top-1 / top-2 margin is below the
// KV dtype's rounding (0.3 logits BF16, 1.0 FP8, as tests/model/glm_moe_dsa_test.cpp).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "e2e/server_process.h"
#include "engine/engine.h"
#include "mla_checkpoints.h"
#include "model/model_loader.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace densa::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Family {
  std::string name;
  fs::path golden_dir;  // where golden.json and the logits are
};

fs::path ref(const std::string& arch) { return fs::path(DENSA_SOURCE_DIR) / "tests/data/reference" / arch; }

std::string tokenizer_path() { return (models_dir() / "tokenizer" / "tokenizer.model").string(); }

fs::path checkpoint(const std::string& name) { return serve_checkpoint(name); }

struct Prompt {
  std::vector<TokenId> ids, greedy;
  std::vector<float> logits;  // golden [prompt + greedy, vocab]
};

std::vector<Prompt> golden(const fs::path& dir) {
  const json j = read_json(dir / "golden.json");
  std::vector<Prompt> out;
  for (size_t i = 0; i < j["prompts"].size(); ++i) {
    Prompt p;
    p.ids = j["prompts"][i]["prompt_ids"].get<std::vector<TokenId>>();
    p.greedy = j["prompts"][i]["greedy_ids"].get<std::vector<TokenId>>();
    p.logits = read_binary<float>(dir / ("prompt" + std::to_string(i) + ".logits.f32.bin"));
    out.push_back(std::move(p));
  }
  return out;
}

// Greedy tokens of each prompt through an in-process Engine, one request at a time.
std::vector<std::vector<TokenId>> engine_greedy(const fs::path& dir, DType kv, const std::vector<Prompt>& ps) {
  Result<ModelWeights> w = load_model(dir, LoadOptions{.bf16_f32_activations = true});  // as --bf16-activations f32
  CHECK(w.is_ok()) << w.status().to_string();
  EngineConfig ec;
  ec.kv_dtype = kv;
  ec.page_size = 4;
  ec.chunked_prefill_size = 5;
  ec.num_threads = 2;
  ec.audit_every_step = true;
  auto engine = Engine::create(*w, ec);
  CHECK(engine.is_ok()) << engine.status().to_string();
  std::vector<std::vector<TokenId>> out;
  for (const Prompt& p : ps) {
    GenerateRequest r;
    r.prompt = p.ids;
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = static_cast<int>(p.greedy.size());
    r.ignore_eos = true;
    auto s = engine.value()->submit(r);
    CHECK(s.is_ok()) << s.status().to_string();
    std::vector<TokenId> got;
    FinishReason finish = FinishReason::kNone;
    while (finish == FinishReason::kNone) {
      std::optional<TokenEvent> e = s.value()->next(std::chrono::milliseconds(60000));
      CHECK(e.has_value()) << "request timed out";
      CHECK(e->error.is_ok()) << e->error.to_string();
      if (e->token) got.push_back(*e->token);
      finish = e->finish;
    }
    out.push_back(std::move(got));
  }
  engine.value()->shutdown();
  return out;
}

// The JSON strings the server writes for these tokens' bytes (invalid UTF-8 replaced on dump).
json token_strings(const Tokenizer& tok, const std::vector<TokenId>& ids) {
  json a = json::array();
  for (TokenId id : ids) a.push_back(tok.token_bytes(id));
  return json::parse(a.dump(-1, ' ', false, json::error_handler_t::replace));
}

class ServeMlaFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeMlaFamilies, GreedyOverHttpEqualsTheEngineAndFollowsTheGolden) {
  const std::string name = GetParam();
  const fs::path dir = checkpoint(name);
  const std::vector<Prompt> ps = golden(name == "glm_moe_dsa" ? ref(name) : deepseek_v3_ref_dir());
  Result<Tokenizer> tok = Tokenizer::from_sentencepiece_file(tokenizer_path());
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  ::setenv("DENSA_KV_AUDIT", "1", 1);  // the server CHECKs the page / radix audit every step
  // The golden logits' arithmetic (fp32 x, exact BF16 products): --bf16-activations f32 for the
  // server, LoadOptions::bf16_f32_activations for the in-process engine.
  for (auto [kv, kv_name, margin] : {std::tuple{DType::kBF16, "bf16", 0.3}, std::tuple{DType::kFP8E4M3, "fp8", 1.0}}) {
    const std::vector<std::vector<TokenId>> want = engine_greedy(dir, kv, ps);
    ServerProcess server({"--bf16-activations", "f32", "--kv-dtype", kv_name, "--page-size", "4",
                          "--chunked-prefill-size", "5"},
                         dir.string());
    ASSERT_TRUE(server.wait_ready()) << name << " " << kv_name;
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < ps.size(); ++i) {
        const json body = {{"prompt", ps[i].ids}, {"max_tokens", ps[i].greedy.size()}, {"temperature", 0},
                           {"ignore_eos", true}, {"logprobs", 0}};
        const CurlResponse r = server.post("/v1/completions", body.dump());
        ASSERT_EQ(r.status, 200) << r.body << server.log();
        const json j = json::parse(r.body);
        EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"], token_strings(*tok, want[i]))
            << name << " " << kv_name << " prompt " << i << " round " << round;
        EXPECT_EQ(j["usage"]["completion_tokens"], ps[i].greedy.size());
        const int cached = j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
        if (round == 1) {  // every full page of the prompt but the one holding its last token
          EXPECT_EQ(cached, static_cast<int>((ps[i].ids.size() - 1) / 4 * 4)) << name << " prompt " << i;
        }
      }
    }
    const CurlResponse health = server.get("/health?audit=1");
    EXPECT_EQ(health.status, 200) << health.body;
    EXPECT_EQ(server.stop(), 0) << server.log();
    // The engine's tokens against the PyTorch reference.
    for (size_t i = 0; i < ps.size(); ++i) {
      ASSERT_EQ(want[i].size(), ps[i].greedy.size());
      for (size_t k = 0; k < want[i].size(); ++k) {
        if (want[i][k] == ps[i].greedy[k]) continue;
        const float* row = ps[i].logits.data() + (ps[i].ids.size() - 1 + k) * 1024;
        std::vector<float> top(row, row + 1024);
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
        EXPECT_LT(top[0] - top[1], margin) << name << " " << kv_name << " prompt " << i << " parts at step " << k;
        break;
      }
    }
  }
  ::unsetenv("DENSA_KV_AUDIT");
  fs::remove_all(dir);
}

// Prefill / decode disaggregation on the latent (MLA, MLA + DSA) KV layouts: a `--role prefill`
// and a `--role decode` server exchange the prompt's latent pages (and GLM-5's FP8 index keys)
// over UCX. With BF16 on both sides the pages move as they are, so every completion equals the
// colocated server's token for token and logprob for logprob. A decode worker with FP8 KV gets
// them converted on the sender (one FP8 latent row and its scale in place of the BF16 row; the
// index keys as they are), the wire carries fewer bytes, and the answers come back whole.
class DisaggMlaFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(DisaggMlaFamilies, PrefillToDecodeEqualsColocated) {
  const std::string name = GetParam();
  const fs::path dir = checkpoint(name);
  const std::vector<Prompt> ps = golden(name == "glm_moe_dsa" ? ref(name) : deepseek_v3_ref_dir());
  const std::vector<std::string> common = {"--bf16-activations", "f32", "--page-size", "4", "--chunked-prefill-size", "5",
                                           "--served-model-name", "m"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ServerProcess colocated(with({}), dir.string());
  ServerProcess prefill(with({"--role", "prefill"}), dir.string());
  ServerProcess decode(with({"--role", "decode"}), dir.string());
  ServerProcess decode_fp8(with({"--role", "decode", "--kv-dtype", "fp8"}), dir.string());
  for (ServerProcess* s : {&colocated, &prefill, &decode, &decode_fp8}) ASSERT_TRUE(s->wait_ready()) << name;
  const std::string header = "-H " + shell_quote("X-Densa-Prefill-Url: http://127.0.0.1:" + std::to_string(prefill.port()));
  auto bytes_sent = [&] {
    const std::string m = prefill.get("/metrics").body;
    const std::string key = "\ndensa_kv_transfer_bytes_total ";
    const size_t at = m.find(key);
    return at == std::string::npos ? -1.0 : std::atof(m.c_str() + at + key.size());
  };
  double bf16_bytes = 0, fp8_bytes = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    const json body = {{"prompt", ps[i].ids}, {"max_tokens", ps[i].greedy.size()}, {"temperature", 0},
                       {"ignore_eos", true}, {"logprobs", 0}};
    const CurlResponse want = colocated.post("/v1/completions", body.dump());
    ASSERT_EQ(want.status, 200) << want.body;
    double before = bytes_sent();
    const CurlResponse got = decode.post("/v1/completions", body.dump(), header);
    ASSERT_EQ(got.status, 200) << got.body << decode.log() << prefill.log();
    bf16_bytes += bytes_sent() - before;
    const json w = json::parse(want.body), g = json::parse(got.body);
    EXPECT_EQ(g["choices"][0]["logprobs"]["tokens"], w["choices"][0]["logprobs"]["tokens"]) << name << " prompt " << i;
    EXPECT_EQ(g["choices"][0]["logprobs"]["token_logprobs"], w["choices"][0]["logprobs"]["token_logprobs"])
        << name << " prompt " << i << ": the same latent bytes and the same last-token compute";
    before = bytes_sent();
    const CurlResponse converted = decode_fp8.post("/v1/completions", body.dump(), header);
    ASSERT_EQ(converted.status, 200) << converted.body << decode_fp8.log();
    fp8_bytes += bytes_sent() - before;
    EXPECT_EQ(json::parse(converted.body)["usage"]["completion_tokens"], ps[i].greedy.size());
  }
  EXPECT_GT(bf16_bytes, 0.0);
  EXPECT_LT(fp8_bytes, 0.7 * bf16_bytes) << name << ": FP8 latent rows " << fp8_bytes << " bytes vs BF16 " << bf16_bytes;
  const json layout = json::parse(decode_fp8.get("/disagg/v1/layout").body);
  EXPECT_GT(layout["latent_dim"].get<int>(), 0) << layout.dump();
  EXPECT_EQ(layout["index_dim"].get<int>() > 0, name == "glm_moe_dsa") << layout.dump();
  for (ServerProcess* s : {&decode, &decode_fp8, &prefill}) {
    const CurlResponse h = s->get("/health?audit=1");
    EXPECT_EQ(h.status, 200) << h.body;
    EXPECT_EQ(json::parse(h.body)["kv_pages_used"], 0) << "pages left in use";
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, DisaggMlaFamilies,
                         ::testing::Values(std::string("glm_moe_dsa"), std::string("kimi_k25")),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Families, ServeMlaFamilies,
                         ::testing::Values(std::string("glm_moe_dsa"), std::string("kimi_k25"),
                                           std::string("glm4_moe_lite")),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace densa::testing
