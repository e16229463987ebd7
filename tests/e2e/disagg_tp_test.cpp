// Prefill/decode disaggregation between tensor-parallel groups, end to end: a prefill group
// (`mpirun -n 2 densa serve --role prefill --tp 2`) and a decode group (the same with --role
// decode), each rank moving its own KV shard to the rank of the same index over UCX (TCP),
// against a colocated group of the same layout, behind curl.
//  - Both fixtures' shapes: the Mixtral-style GGUF (GQA: each rank holds half the KV heads) and
//    the GLM-5 reference checkpoint (MLA + DSA: the latent rows and index keys whole on every
//    rank), BF16 KV; and the Llama fixture with static fp8 KV scales per kv head from the
//    checkpoint (each rank's pages under its own heads' scales, which the order carries per
//    rank: a sender using rank 0's would re-quantize rank 1's pages).
//  - Greedy completions with logprobs equal the colocated group's bit for bit (the same KV bytes
//    on every rank and the same last-token compute), 16 at once too; both groups count the
//    same wire bytes, twice one rank's; the page and radix audits are clean after.
//  - A single-process peer on either side is refused with kv_layout_mismatch, naming both sizes.
//  - A prefill group that lost a rank fails the decode request with kv_transfer_failed within
//    the timeout, and the decode group serves the next request from a healthy prefill group.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "e2e/server_process.h"
#include "kv_scales_checkpoint.h"
#include "mla_checkpoints.h"
#include "test_util.h"

namespace densa::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<std::string> kMpirun = {"mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
                                          "btl_vader_single_copy_mechanism", "none", "-n", "2"};

double metric_value(const std::string& metrics, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = metrics.find(key);
  return at == std::string::npos ? -1.0 : std::atof(metrics.c_str() + at + key.size());
}

std::string prefill_header(const ServerProcess& prefill) {
  return "-H " + shell_quote("X-Densa-Prefill-Url: " + prefill.url(""));
}

struct Model {
  std::string name;
  std::string path;
  std::vector<json> prompts;        // completion prompts (text, or token ids)
  std::vector<std::string> flags;   // serve flags for every group
};

Model model_of(const std::string& name) {
  if (name == "mixtral") {
    return {name,
            fixture_model_path(),
            {"Once upon a time, there was a little girl named Lily. She loved to play outside",
             "Tom had a big red ball. One day he went to the park with his mom and", "The sun was shining and",
             "Once"},
            {"--kv-dtype", "bf16"}};
  }
  if (name == "llama_static_fp8") {  // per-head fp8 scales: each rank's pages under its own
    const fs::path dir = checkpoint_with_kv_scales(model_dir("tinystories-llama-1m") / "hf", "disagg_tp");
    return {name,
            dir.string(),
            {"Once upon a time, there was a little girl named Lily. She loved to play outside",
             "The sun was shining and"},
            {"--kv-dtype", "fp8", "--kv-scales", "checkpoint"}};
  }
  const fs::path dir = serve_checkpoint(name);  // glm_moe_dsa: index_topk 8, prompts of 12-40 ids
  const json golden = read_json(fs::path(DENSA_SOURCE_DIR) / "tests/data/reference" / name / "golden.json");
  std::vector<json> prompts;
  for (const json& p : golden["prompts"]) prompts.push_back(p["prompt_ids"]);
  return {name, dir.string(), prompts, {"--kv-dtype", "bf16", "--page-size", "4", "--chunked-prefill-size", "5"}};
}

class DisaggTp : public ::testing::TestWithParam<std::string> {};

TEST_P(DisaggTp, GroupsMoveEachRanksShardAndEqualTheColocatedGroup) {
  setenv("UCX_TLS", "tcp", 1);  // the children inherit it
  const Model m = model_of(GetParam());
  auto flags = [&](std::vector<std::string> extra) {
    std::vector<std::string> f = m.flags;
    f.insert(f.end(), {"--tp", "2", "--served-model-name", "m"});
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  };
  ServerProcess colocated(flags({}), m.path, kMpirun);
  ServerProcess prefill(flags({"--role", "prefill"}), m.path, kMpirun);
  ServerProcess decode(flags({"--role", "decode"}), m.path, kMpirun);
  for (ServerProcess* s : {&colocated, &prefill, &decode}) ASSERT_TRUE(s->wait_ready(std::chrono::seconds(120)));
  std::vector<json> want;
  for (const json& prompt : m.prompts) {
    const std::string body =
        json({{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}, {"logprobs", 2}, {"ignore_eos", true}}).dump();
    const CurlResponse ref = colocated.post("/v1/completions", body);
    const CurlResponse got = decode.post("/v1/completions", body, prefill_header(prefill));
    ASSERT_EQ(ref.status, 200) << ref.body;
    ASSERT_EQ(got.status, 200) << got.body << decode.log() << prefill.log();
    const json r = json::parse(ref.body)["choices"][0], g = json::parse(got.body)["choices"][0];
    EXPECT_EQ(g["text"], r["text"]) << prompt;
    EXPECT_EQ(g["logprobs"]["tokens"], r["logprobs"]["tokens"]) << prompt;
    EXPECT_EQ(g["logprobs"]["token_logprobs"], r["logprobs"]["token_logprobs"])
        << prompt << ": the same KV bytes on every rank and the same last-token compute";
    EXPECT_EQ(g["logprobs"]["top_logprobs"], r["logprobs"]["top_logprobs"]) << prompt;
    want.push_back(r);
  }
  // 16 at once: every answer is the colocated one (transfers of several requests interleave
  // with the groups' steps).
  const std::string body = json({{"prompt", m.prompts[1]}, {"max_tokens", 12}, {"temperature", 0},
                                 {"logprobs", 1}, {"ignore_eos", true}})
                               .dump();
  const CurlResponse ref = colocated.post("/v1/completions", body);
  ASSERT_EQ(ref.status, 200) << ref.body;
  std::vector<std::future<CurlResponse>> many;
  for (int i = 0; i < 16; ++i) {
    many.push_back(std::async(std::launch::async, [&] { return decode.post("/v1/completions", body, prefill_header(prefill)); }));
  }
  const json r = json::parse(ref.body)["choices"][0];
  for (auto& f : many) {
    const CurlResponse got = f.get();
    ASSERT_EQ(got.status, 200) << got.body;
    const json g = json::parse(got.body)["choices"][0];
    EXPECT_EQ(g["logprobs"]["token_logprobs"], r["logprobs"]["token_logprobs"]);
  }
  // Both groups count every rank's bytes: the same total on each side, each rank half of it.
  const double received = metric_value(decode.get("/metrics").body, "densa_kv_transfer_bytes_total");
  const double sent = metric_value(prefill.get("/metrics").body, "densa_kv_transfer_bytes_total");
  EXPECT_GT(received, 0);
  EXPECT_EQ(received, sent);
  EXPECT_EQ(metric_value(decode.get("/metrics").body, "densa_kv_transfer_failures_total"), 0.0);
  for (ServerProcess* s : {&decode, &prefill}) {
    const CurlResponse audit = s->get("/health?deep=1");
    EXPECT_EQ(audit.status, 200) << audit.body;
  }
  if (m.name != "mixtral") fs::remove_all(m.path);
}

INSTANTIATE_TEST_SUITE_P(Models, DisaggTp,
                         ::testing::Values(std::string("mixtral"), std::string("glm_moe_dsa"),
                                           std::string("llama_static_fp8")),
                         [](const auto& info) { return info.param; });

// Group sizes must match: a single process on either side is refused by name, and the group
// serves on.
TEST(DisaggTpErrors, ASinglePeerIsRefusedAndADeadRankFailsTheRequestInTime) {
  setenv("UCX_TLS", "tcp", 1);
  ServerProcess single_prefill({"--role", "prefill"});
  ServerProcess single_decode({"--role", "decode"});
  ServerProcess prefill({"--tp", "2", "--role", "prefill"}, fixture_model_path(), kMpirun);
  ServerProcess decode({"--tp", "2", "--role", "decode", "--disagg-timeout-ms", "20000"}, fixture_model_path(),
                       kMpirun);
  for (ServerProcess* s : {&single_prefill, &single_decode, &prefill, &decode}) {
    ASSERT_TRUE(s->wait_ready(std::chrono::seconds(120)));
  }
  const std::string body = json({{"prompt", "Once upon a time, there was a little girl"}, {"max_tokens", 6},
                                 {"temperature", 0}})
                               .dump();
  const CurlResponse a = decode.post("/v1/completions", body, prefill_header(single_prefill));
  EXPECT_EQ(a.status, 502) << a.body;
  EXPECT_NE(a.body.find("kv_layout_mismatch"), std::string::npos) << a.body;
  EXPECT_NE(a.body.find("the decode side runs 2 rank(s), this prefill side 1"), std::string::npos) << a.body;
  const CurlResponse b = single_decode.post("/v1/completions", body, prefill_header(prefill));
  EXPECT_EQ(b.status, 502) << b.body;
  EXPECT_NE(b.body.find("the decode side runs 1 rank(s), this prefill side 2"), std::string::npos) << b.body;
  const CurlResponse ok = decode.post("/v1/completions", body, prefill_header(prefill));
  ASSERT_EQ(ok.status, 200) << ok.body;
  const json want = json::parse(ok.body)["choices"][0]["text"];

  // The prefill group loses a rank (SIGKILL, as the other MPI tests find it): mpirun ends that
  // group, and the decode request fails instead of waiting.
  const pid_t rank1 = prefill.rank_pid(1);
  ASSERT_GT(rank1, 0) << prefill.log();
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  const auto start = std::chrono::steady_clock::now();
  const CurlResponse dead = decode.post("/v1/completions", body, prefill_header(prefill) + " --max-time 60");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  EXPECT_EQ(dead.status, 502) << dead.body;
  EXPECT_NE(dead.body.find("kv_transfer_failed"), std::string::npos) << dead.body;
  // A healthy prefill group: the decode group serves the same answer.
  ServerProcess prefill2({"--tp", "2", "--role", "prefill"}, fixture_model_path(), kMpirun);
  ASSERT_TRUE(prefill2.wait_ready(std::chrono::seconds(120)));
  const CurlResponse again = decode.post("/v1/completions", body, prefill_header(prefill2));
  ASSERT_EQ(again.status, 200) << again.body << decode.log();
  EXPECT_EQ(json::parse(again.body)["choices"][0]["text"], want);
  EXPECT_EQ(decode.get("/health?deep=1").status, 200);
}

}  // namespace
}  // namespace densa::testing
