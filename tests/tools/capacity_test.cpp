// densa capacity: KV bytes per token by hand, parameter counts, the BF16 -> FP8 doubling on
// the fixtures and on published configs, and the real binary end to end.
#include "tools/capacity/capacity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

namespace densa {
namespace {

namespace fs = std::filesystem;

fs::path config_dir() { return fs::path(DENSA_SOURCE_DIR) / "tests/data/configs"; }
fs::path fixture_dir(const std::string& name) { return fs::path(DENSA_MODELS_DIR) / name; }

CapacityModel load(const fs::path& p) {
  Result<CapacityModel> m = load_capacity_model(p);
  CHECK(m.is_ok()) << m.status().to_string();
  return std::move(m).value();
}

struct NamedModel {
  std::string name;
  fs::path path;
  int64_t bf16_bytes_per_token;    // hand-computed
  int64_t dynamic_scale_bytes;     // per token, hand-computed
};

// Hand-computed KV bytes per token:
//   llama/mixtral fixtures: 4 layers * 2 (K,V) * 4 kv heads * 16 dims * 2 B = 1024;
//                           dynamic scales 4 * 2 * 4 * 4 B = 128
//   DeepSeek-V3 / Kimi K2:  61 layers * (512 + 64) latent * 2 B = 70272; scales 61 * 4 = 244
//   GLM-4.5:                92 * 2 * 8 * 128 * 2 B = 376832; scales 92 * 2 * 8 * 4 = 5888
std::vector<NamedModel> all_models() {
  return {
      {"llama-1m", fixture_dir("tinystories-llama-1m") / "hf/config.json", 1024, 128},
      {"mixtral-3.6m", fixture_dir("tinystories-mixtral-3.6m") / "hf/config.json", 1024, 128},
      {"deepseek-v3", config_dir() / "deepseek-v3.json", 70272, 244},
      {"kimi-k2", config_dir() / "kimi-k2.json", 70272, 244},
      {"glm-4.5", config_dir() / "glm-4.5.json", 376832, 5888},
  };
}

KvFormat bf16_kv() { return {DType::kBF16, KvScaleMode::kNone, 16}; }
KvFormat fp8_kv(KvScaleMode mode) { return {DType::kFP8E4M3, mode, 16}; }

TEST(CapacityTest, KvBytesPerTokenMatchesHandComputed) {
  for (const NamedModel& nm : all_models()) {
    SCOPED_TRACE(nm.name);
    const CapacityModel m = load(nm.path);
    const KvTokenBytes bf16 = kv_bytes_per_token(m, bf16_kv());
    EXPECT_EQ(bf16.data, nm.bf16_bytes_per_token);
    EXPECT_EQ(bf16.scales, 0);
    EXPECT_EQ(bf16.static_scales, 0);
    const KvTokenBytes dyn = kv_bytes_per_token(m, fp8_kv(KvScaleMode::kDynamic));
    EXPECT_EQ(dyn.data * 2, nm.bf16_bytes_per_token);
    EXPECT_EQ(dyn.scales, nm.dynamic_scale_bytes);
    const KvTokenBytes stat = kv_bytes_per_token(m, fp8_kv(KvScaleMode::kStatic));
    EXPECT_EQ(stat.data * 2, nm.bf16_bytes_per_token);
    EXPECT_EQ(stat.scales, 0);
    // One scale per (layer, k|v, head); an MLA latent cache: two per layer (c_kv, k_pe).
    EXPECT_EQ(stat.static_scales,
              m.attention == KvAttention::kMla ? 2 * nm.dynamic_scale_bytes : nm.dynamic_scale_bytes);
  }
}

TEST(CapacityTest, GqaPageBytesEqualKvLayout) {
  const CapacityModel m = load(config_dir() / "glm-4.5.json");
  ASSERT_EQ(m.attention, KvAttention::kGqa);
  for (KvFormat kv : {bf16_kv(), fp8_kv(KvScaleMode::kStatic), fp8_kv(KvScaleMode::kDynamic)}) {
    KvLayout layout;
    layout.num_layers = static_cast<int>(m.num_layers);
    layout.num_kv_heads = static_cast<int>(m.num_kv_heads);
    layout.head_dim = static_cast<int>(m.head_dim);
    layout.page_size = kv.page_size;
    layout.dtype = kv.dtype;
    layout.scale_mode = kv.scale_mode;
    CapacityRequest req;
    req.kv_memory_bytes = int64_t{1} << 30;
    req.kv = kv;
    req.context_tokens = 4096;
    Result<CapacityReport> r = plan_capacity(m, req);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->page_bytes, layout.page_bytes());
  }
}

TEST(CapacityTest, ParameterCounts) {
  // Fixtures: exact (shared/models/README.md).
  EXPECT_EQ(load(fixture_dir("tinystories-llama-1m") / "hf/config.json").num_params(), 1049728);
  EXPECT_EQ(load(fixture_dir("tinystories-mixtral-3.6m") / "hf/config.json").num_params(), 3609728);
  // GGUF headers give the same counts as the HF configs.
  EXPECT_EQ(load(fixture_dir("tinystories-llama-1m") / "gguf/tinystories-llama-1m-f16.gguf").num_params(),
            1049728);
  EXPECT_EQ(load(fixture_dir("tinystories-mixtral-3.6m") / "gguf/tinystories-mixtral-3.6m-f32.gguf").num_params(),
            3609728);
  // Published totals (without the multi-token-prediction layer): DeepSeek-V3 671B,
  // Kimi K2 ~1.03T, GLM-4.5 355B (incl. its MTP layer, ~352B without).
  const int64_t ds = load(config_dir() / "deepseek-v3.json").num_params();
  EXPECT_GT(ds, 670'000'000'000);
  EXPECT_LT(ds, 672'000'000'000);
  const int64_t kimi = load(config_dir() / "kimi-k2.json").num_params();
  EXPECT_GT(kimi, 1'000'000'000'000);
  EXPECT_LT(kimi, 1'040'000'000'000);
  const int64_t glm = load(config_dir() / "glm-4.5.json").num_params();
  EXPECT_GT(glm, 350'000'000'000);
  EXPECT_LT(glm, 356'000'000'000);
}

TEST(CapacityTest, GgufKvShapeMatchesHfConfig) {
  for (const char* name : {"tinystories-llama-1m", "tinystories-mixtral-3.6m"}) {
    const CapacityModel hf = load(fixture_dir(name) / "hf");
    const CapacityModel gguf = load(fixture_dir(name) / "gguf" / (std::string(name) + "-f32.gguf"));
    EXPECT_EQ(gguf.attention, KvAttention::kGqa);
    EXPECT_EQ(gguf.num_layers, hf.num_layers);
    EXPECT_EQ(gguf.num_kv_heads, hf.num_kv_heads);
    EXPECT_EQ(gguf.head_dim, hf.head_dim);
    EXPECT_EQ(gguf.max_position_embeddings, 256);
    EXPECT_EQ(estimate_weight_bytes(gguf, WeightFormat::kBF16).bytes(),
              estimate_weight_bytes(hf, WeightFormat::kBF16).bytes());
  }
}

TEST(CapacityTest, WeightBytesByFormatHandComputed) {
  // llama-1m: 786,432 params in linear layers (4 layers x (q 128x128, k 64x128, v 64x128,
  // o 128x128, gate/up 384x128, down 128x384)); 263,296 stay bf16 (embeddings, lm_head, norms).
  const CapacityModel m = load(fixture_dir("tinystories-llama-1m") / "hf/config.json");
  const int64_t linear = 786432;
  const int64_t other = 1049728 - linear;
  const WeightEstimate bf16 = estimate_weight_bytes(m, WeightFormat::kBF16);
  EXPECT_EQ(bf16.bytes(), 2 * 1049728);
  EXPECT_EQ(bf16.scale_bytes, 0);
  const WeightEstimate fp8 = estimate_weight_bytes(m, WeightFormat::kFP8);
  EXPECT_EQ(fp8.num_linear_params, linear);
  EXPECT_EQ(bf16.num_linear_params, linear);
  EXPECT_EQ(fp8.data_bytes, 2 * other + linear);
  // 128x128 blocks per layer: q 1, k 1, v 1, o 1, gate 3, up 3, down 3 = 13; 4 B each.
  EXPECT_EQ(fp8.scale_bytes, 4 * 13 * 4);
  const WeightEstimate int4 = estimate_weight_bytes(m, WeightFormat::kINT4);
  EXPECT_EQ(int4.data_bytes, 2 * other + linear / 2);
  // Groups of 32 along the input dim, bf16 scale: per layer (128+64+64+128+384+384) rows x 4
  // groups + 128 rows x 12 groups = 4608 + 1536 = 6144 groups.
  EXPECT_EQ(int4.scale_bytes, 4 * 6144 * 2);
}

void expect_doubling(const CapacityModel& m, CapacityRequest req) {
  req.kv = bf16_kv();
  Result<CapacityReport> bf16 = plan_capacity(m, req);
  ASSERT_TRUE(bf16.is_ok()) << bf16.status().to_string();
  for (KvScaleMode mode : {KvScaleMode::kStatic, KvScaleMode::kDynamic}) {
    req.kv = fp8_kv(mode);
    Result<CapacityReport> fp8 = plan_capacity(m, req);
    ASSERT_TRUE(fp8.is_ok()) << fp8.status().to_string();
    EXPECT_EQ(fp8->kv_budget_bytes, bf16->kv_budget_bytes);
    EXPECT_EQ(fp8->kv_token_bytes.data * 2, bf16->kv_token_bytes.data);
    // Data alone: exactly twice the tokens, up to the last partially fitting page.
    EXPECT_GE(fp8->num_tokens_data_only, 2 * bf16->num_tokens);
    EXPECT_LE(fp8->num_tokens_data_only, 2 * bf16->num_tokens + req.kv.page_size);
    if (bf16->kv_budget_bytes % bf16->page_bytes == 0) {
      EXPECT_EQ(fp8->num_tokens_data_only, 2 * bf16->num_tokens);
    }
    // The scale overhead is what separates FP8 from the exact doubling.
    const KvTokenBytes& t = fp8->kv_token_bytes;
    const int64_t expect_pages = (fp8->kv_budget_bytes - t.static_scales) / (16 * (t.data + t.scales));
    EXPECT_EQ(fp8->num_pages, expect_pages);
    EXPECT_LE(fp8->num_tokens, fp8->num_tokens_data_only);
    EXPECT_GT(fp8->num_tokens, bf16->num_tokens);
    if (mode == KvScaleMode::kStatic) {
      EXPECT_GE(fp8->num_tokens, fp8->num_tokens_data_only - 16);
    }
  }
}

TEST(CapacityTest, Fp8DoublesBf16TokensOnFixturesAndPublishedConfigs) {
  for (const NamedModel& nm : all_models()) {
    SCOPED_TRACE(nm.name);
    const CapacityModel m = load(nm.path);
    CapacityRequest req;
    req.context_tokens = 8192;
    // A KV budget that is a whole number of BF16 pages: exact doubling.
    req.kv_memory_bytes = 1000 * 16 * nm.bf16_bytes_per_token;
    expect_doubling(m, req);
    // An arbitrary KV budget.
    req.kv_memory_bytes = 123'456'789'012;
    expect_doubling(m, req);
    // A whole-machine budget with the weights taken out (8 x 141 GB H200, FP8 weights).
    req.kv_memory_bytes = 0;
    req.memory_bytes = 8 * 141'000'000'000LL;
    req.weight_format = WeightFormat::kFP8;
    expect_doubling(m, req);
  }
}

TEST(CapacityTest, RequestsAndWeightsOverBudget) {
  const CapacityModel m = load(config_dir() / "kimi-k2.json");
  CapacityRequest req;
  req.memory_bytes = 141'000'000'000LL;  // one H200 cannot hold 1T parameters
  req.context_tokens = 8192;
  Result<CapacityReport> r = plan_capacity(m, req);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);

  req.memory_bytes = 8 * 141'000'000'000LL;
  req.weight_format = WeightFormat::kINT4;
  req.kv = fp8_kv(KvScaleMode::kDynamic);
  r = plan_capacity(m, req);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->pages_per_request, 512);
  EXPECT_EQ(r->num_requests, r->num_pages / 512);
  EXPECT_EQ(r->kv_budget_bytes, req.memory_bytes - r->weights.bytes());
  EXPECT_EQ(r->page_bytes, 16 * (35136 + 244));
}

TEST(CapacityTest, ConfigErrorsNameTheKey) {
  Result<CapacityModel> r = capacity_model_from_hf_config(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "vocab_size": 10, "num_attention_heads": 4,
          "intermediate_size": 8})",
      "x.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("x.json: missing key 'num_hidden_layers'"), std::string::npos)
      << r.status().message();
  // The planner reads config.json through ModelConfig, so it refuses what densa serve refuses,
  // by name.
  r = capacity_model_from_hf_config(R"({"architectures": ["FooForCausalLM"], "hidden_size": 64})", "z.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unsupported architecture 'FooForCausalLM'"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(capacity_model_from_hf_config("{not json", "y.json").is_ok());
  EXPECT_EQ(load_capacity_model("/nonexistent/config.json").status().code(), StatusCode::kNotFound);
}

// ---- the real binary ----

struct RunResult {
  int exit_code = -1;
  std::string out;
};

RunResult run_densa(const std::string& args) {
  const std::string cmd = std::string(DENSA_BINARY) + " " + args + " 2>&1";
  RunResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// --lm-head-dtype: only the output projection changes format; a tied head gets its own copy.
TEST(CapacityTest, LmHeadFormatHandComputed) {
  // llama-1m: untied lm_head 1024 x 128 (HF config and the GGUF's output.weight).
  const CapacityModel m = load(fixture_dir("tinystories-llama-1m") / "hf/config.json");
  const int64_t head = 1024 * 128;
  for (WeightFormat body : {WeightFormat::kBF16, WeightFormat::kFP8, WeightFormat::kINT4}) {
    const WeightEstimate as_stored = estimate_weight_bytes(m, body);
    EXPECT_EQ(estimate_weight_bytes(m, body, WeightFormat::kBF16).bytes(), as_stored.bytes());
    const WeightEstimate fp8 = estimate_weight_bytes(m, body, WeightFormat::kFP8);
    EXPECT_EQ(fp8.data_bytes, as_stored.data_bytes - 2 * head + head);
    EXPECT_EQ(fp8.scale_bytes, as_stored.scale_bytes + 8 * 1 * 4);  // 128x128 blocks
    const WeightEstimate int4 = estimate_weight_bytes(m, body, WeightFormat::kINT4);
    EXPECT_EQ(int4.data_bytes, as_stored.data_bytes - 2 * head + head / 2);
    EXPECT_EQ(int4.scale_bytes, as_stored.scale_bytes + 1024 * 4 * 2);  // groups of 32, bf16
    EXPECT_EQ(int4.num_params, as_stored.num_params);
  }
  const CapacityModel gguf =
      load(fixture_dir("tinystories-llama-1m") / "gguf" / "tinystories-llama-1m-f32.gguf");
  EXPECT_EQ(estimate_weight_bytes(gguf, WeightFormat::kINT4, WeightFormat::kFP8).bytes(),
            estimate_weight_bytes(m, WeightFormat::kINT4, WeightFormat::kFP8).bytes());

  // The same shape with tied embeddings: no lm_head tensor; a BF16 head shares the embeddings,
  // a quantized one is a copy beside them.
  std::ifstream in(fixture_dir("tinystories-llama-1m") / "hf/config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"tie_word_embeddings\": false");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("\"tie_word_embeddings\": false").size(), "\"tie_word_embeddings\": true");
  Result<CapacityModel> tied = capacity_model_from_hf_config(text, "tied");
  ASSERT_TRUE(tied.is_ok()) << tied.status().to_string();
  const WeightEstimate tied_stored = estimate_weight_bytes(*tied, WeightFormat::kINT4);
  EXPECT_EQ(tied_stored.bytes(), estimate_weight_bytes(m, WeightFormat::kINT4).bytes() - 2 * head);
  EXPECT_EQ(estimate_weight_bytes(*tied, WeightFormat::kINT4, WeightFormat::kBF16).bytes(), tied_stored.bytes());
  EXPECT_EQ(estimate_weight_bytes(*tied, WeightFormat::kINT4, WeightFormat::kFP8).bytes(),
            tied_stored.bytes() + head + 8 * 4);

  // Through the binary: the JSON names the head's format and the bytes match the API.
  const std::string model = (fixture_dir("tinystories-llama-1m") / "hf").string();
  RunResult run = run_densa("capacity --model " + model +
                            " --memory 1GiB --weight-dtype int4 --lm-head-dtype fp8 --context 256 --json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["lm_head_dtype"], "fp8");
  EXPECT_EQ(j["weight_bytes"], estimate_weight_bytes(m, WeightFormat::kINT4, WeightFormat::kFP8).bytes());
  RunResult bad = run_densa("capacity --model " + model + " --memory 1GiB --lm-head-dtype q5_k");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--lm-head-dtype must be bf16, fp8 or int4"), std::string::npos) << bad.out;
}

TEST(CapacityTest, EndToEndBinaryJsonAndText) {
  const std::string model = (config_dir() / "glm-4.5.json").string();
  RunResult bf16 = run_densa("capacity --model " + model +
                             " --memory 1128GB --weight-dtype fp8 --kv-dtype bf16 --context 8192 --json");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.out;
  RunResult fp8 = run_densa("capacity --model " + model +
                            " --memory 1128GB --weight-dtype fp8 --kv-dtype fp8 --kv-scales dynamic"
                            " --context 8192 --json");
  ASSERT_EQ(fp8.exit_code, 0) << fp8.out;
  const nlohmann::json jb = nlohmann::json::parse(bf16.out);
  const nlohmann::json jf = nlohmann::json::parse(fp8.out);
  EXPECT_EQ(jb["kv_data_bytes_per_token"], 376832);
  EXPECT_EQ(jf["kv_data_bytes_per_token"], 188416);
  EXPECT_EQ(jf["kv_scale_bytes_per_token"], 5888);
  EXPECT_EQ(jb["kv_budget_bytes"], jf["kv_budget_bytes"]);
  EXPECT_EQ(jb["memory_bytes"], 1128'000'000'000LL);
  const int64_t bf16_tokens = jb["num_tokens"];
  const int64_t fp8_data_only = jf["num_tokens_data_only"];
  EXPECT_GE(fp8_data_only, 2 * bf16_tokens);
  EXPECT_LE(fp8_data_only, 2 * bf16_tokens + 16);
  EXPECT_EQ(jf["pages_per_request"], 512);

  // The same through the in-process API.
  CapacityRequest req;
  req.memory_bytes = 1128'000'000'000LL;
  req.weight_format = WeightFormat::kFP8;
  req.kv = fp8_kv(KvScaleMode::kDynamic);
  req.context_tokens = 8192;
  Result<CapacityReport> r = plan_capacity(load(model), req);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(jf["num_tokens"], r->num_tokens);
  EXPECT_EQ(jf["num_requests"], r->num_requests);
  EXPECT_EQ(jf["weight_bytes"], r->weights.bytes());

  // Text output on a fixture directory and on a GGUF file.
  const std::string fixture = fixture_dir("tinystories-mixtral-3.6m").string();
  RunResult text = run_densa("capacity --model " + fixture + "/hf --memory 1GiB --kv-dtype fp8 --context 256");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("kv bytes/token  data 512 + scales 128 = 640"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("MixtralForCausalLM"), std::string::npos) << text.out;
  RunResult gguf = run_densa("capacity --model " + fixture +
                             "/gguf/tinystories-mixtral-3.6m-f16.gguf --kv-memory 1MiB --json");
  ASSERT_EQ(gguf.exit_code, 0) << gguf.out;
  const nlohmann::json jg = nlohmann::json::parse(gguf.out);
  EXPECT_EQ(jg["kv_data_bytes_per_token"], 1024);
  EXPECT_EQ(jg["num_tokens"], (1 << 20) / 1024);
  EXPECT_EQ(jg["context_tokens"], 256);
}

TEST(CapacityTest, EndToEndBinaryErrors) {
  const std::string model = (config_dir() / "kimi-k2.json").string();
  RunResult too_small = run_densa("capacity --model " + model + " --memory 141G --context 8192");
  EXPECT_NE(too_small.exit_code, 0);
  EXPECT_NE(too_small.out.find("do not fit"), std::string::npos) << too_small.out;
  EXPECT_EQ(std::count(too_small.out.begin(), too_small.out.end(), '\n'), 1) << too_small.out;
  RunResult bad_unit = run_densa("capacity --model " + model + " --memory 141Q");
  EXPECT_NE(bad_unit.exit_code, 0);
  EXPECT_NE(bad_unit.out.find("unknown byte unit"), std::string::npos) << bad_unit.out;
  RunResult missing = run_densa("capacity --model /nonexistent.json --memory 1G");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.out.find("no such file"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace densa
