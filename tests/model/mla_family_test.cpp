// The DeepSeek-V3 (MLA) computation under other architectures' layouts.
// Kimi-K2.5 (KimiK25ForConditionalGeneration): the DeepSeek-V3 text model nested under
// text_config, its tensors under "language_model.", beside a vision tower and projector and a
// NextN (MTP) layer. The checkpoints here are the deepseek_v3 PyTorch-reference checkpoint
// (tests/reference/deepseek_v3_ref.py) re-wrapped in Kimi-K2.5's layout, so the wrapped load
// must compute exactly what the plain one does, and match the reference's golden logits; the
// routed experts also as Kimi ships them (compressed-tensors INT4, group 32).
// GLM-4.7-Flash (Glm4MoeLiteForCausalLM): HF's Glm4MoeLite is DeepseekV3Attention with GLM-4.5's
// sigmoid-routed MoE, configured with transformers v5 keys (rope_parameters, mlp_layer_types);
// the same checkpoint under that config must compute the same logits.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>

#include "exec/runner.h"
#include "io/gguf_file.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "kv/page_pool.h"
#include "mla_checkpoints.h"
#include "model/arch_deepseek_v3.h"
#include "model/forward.h"
#include "model/hf_tensor_inventory.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "test_util.h"
#include "tools/model_files/quantize.h"

namespace densa {
namespace {

namespace fs = std::filesystem;
using testing::wrap_as_glm4_moe_lite;
using testing::wrap_as_kimi_k25;

fs::path ref_dir() { return fs::path(DENSA_SOURCE_DIR) / "tests/data/reference/deepseek_v3"; }

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("densa_kimi_k25_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

// Teacher-forced logits of `tokens` (one sequence, one batch) with an F32 latent cache.
std::vector<float> logits_of(const ModelWeights& w, const std::vector<TokenId>& tokens) {
  const KvLayout layout = kv_layout_for(w.config, 16, DType::kF32);
  const int pages = static_cast<int>((tokens.size() + 15) / 16);
  Result<PagePool> made = PagePool::create(layout, layout.page_bytes() * pages);
  CHECK(made.is_ok()) << made.status().to_string();
  PagePool kv_pool = std::move(made).value();
  std::vector<int32_t> table;
  for (int p = 0; p < pages; ++p) table.push_back(kv_pool.allocate()->value);
  const std::vector<int32_t> offsets = {0, pages};
  KvView kv;
  kv.layout = layout;
  kv.pool = kv_pool.base();
  kv.block_table = table;
  kv.block_offsets = offsets;
  std::vector<int32_t> positions, seq, rows;
  for (size_t i = 0; i < tokens.size(); ++i) {
    positions.push_back(static_cast<int32_t>(i));
    seq.push_back(0);
    rows.push_back(static_cast<int32_t>(i));
  }
  ForwardScratch scratch;
  std::vector<float> logits(tokens.size() * static_cast<size_t>(w.config.vocab_size));
  forward(w, ForwardBatch{tokens, positions, seq, rows}, kv, scratch, &pool(), logits.data());
  return logits;
}

struct GoldenPrompt {
  std::vector<TokenId> tokens;  // prompt + greedy ids
  size_t prompt_len = 0;
  std::vector<float> logits;
};

// Every prompt of the deepseek_v3 reference's golden.json.
std::vector<GoldenPrompt> golden_prompts() {
  const nlohmann::json g = testing::read_json(ref_dir() / "golden.json");
  std::vector<GoldenPrompt> all;
  for (size_t i = 0; i < g["prompts"].size(); ++i) {
    GoldenPrompt p;
    p.tokens = g["prompts"][i]["prompt_ids"].get<std::vector<TokenId>>();
    p.prompt_len = p.tokens.size();
    for (TokenId t : g["prompts"][i]["greedy_ids"].get<std::vector<TokenId>>()) p.tokens.push_back(t);
    p.logits = testing::read_binary<float>(ref_dir() / ("prompt" + std::to_string(i) + ".logits.f32.bin"));
    all.push_back(std::move(p));
  }
  return all;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  CHECK(a.size() == b.size());
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
  return diff;
}

// Teacher-forced greedy: the argmax at every position from the prompt's last on is the next
// golden token (the reference's greedy continuation).
void expect_greedy_equal(const std::vector<float>& logits, const GoldenPrompt& g, int vocab, const std::string& what) {
  for (size_t t = g.prompt_len - 1; t + 1 < g.tokens.size(); ++t) {
    const float* row = logits.data() + t * static_cast<size_t>(vocab);
    const TokenId arg = static_cast<TokenId>(std::max_element(row, row + vocab) - row);
    EXPECT_EQ(arg, g.tokens[t + 1]) << what << " position " << t;
  }
}

// BF16 matrices on fp32 activations: the golden logits' arithmetic (AMX rounds x to bf16).
ModelWeights load_ok(const fs::path& dir) {
  Result<ModelWeights> r = load_model(dir, LoadOptions{.bf16_f32_activations = true});
  CHECK(r.is_ok()) << r.status().to_string();
  return std::move(r).value();
}

TEST(KimiK25, ConfigNestsTheDeepseekV3TextModel) {
  const fs::path dir = wrap_as_kimi_k25(ref_dir(), "config");
  Result<ModelConfig> c = parse_hf_config(dir / "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "KimiK25ForConditionalGeneration");
  EXPECT_STREQ(c->attention_kind(), "MLA");
  EXPECT_EQ(c->hf_tensor_prefix, "language_model.");
  EXPECT_TRUE(c->has_vision_tower);
  EXPECT_EQ(c->num_layers, 3);
  EXPECT_EQ(c->num_nextn_layers, 1);
  EXPECT_EQ(c->mla.kv_lora_rank, 32);
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_FLOAT_EQ(c->yarn.factor, 4.0f);
  // No text_config: a clear error naming it.
  Result<ModelConfig> bad = parse_hf_config_text(R"({"architectures":["KimiK25ForConditionalGeneration"]})", "k25");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("text_config"), std::string::npos) << bad.status().message();
  fs::remove_all(dir);
}

TEST(KimiK25, LoadsTheTextModelSkipsVisionAndNextn) {
  const fs::path dir = wrap_as_kimi_k25(ref_dir(), "bf16");
  const ModelWeights plain = load_ok(ref_dir());
  const ModelWeights k25 = load_ok(dir);
  EXPECT_EQ(k25.skipped.vision_tensors, 4);
  EXPECT_EQ(k25.skipped.nextn_tensors, 6);
  EXPECT_EQ(plain.skipped.vision_tensors + plain.skipped.nextn_tensors, 0);
  EXPECT_EQ(k25.layers.size(), 3u);  // the NextN layer is not loaded
  EXPECT_EQ(k25.num_params(), plain.num_params());
  const std::vector<std::string> lines = describe_skipped(k25.skipped, k25.config);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("4 vision tensors"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("NextN/MTP layer (layer 3)"), std::string::npos) << lines[1];

  const std::vector<GoldenPrompt> golden = golden_prompts();
  ASSERT_EQ(golden.size(), 4u);
  for (size_t i = 0; i < golden.size(); ++i) {
    const GoldenPrompt& g = golden[i];
    const std::vector<float> a = logits_of(plain, g.tokens), b = logits_of(k25, g.tokens);
    ASSERT_EQ(a, b) << "prompt " << i;  // the same weights, the same computation
    EXPECT_LT(max_abs_diff(b, g.logits), 1e-3) << "prompt " << i;  // the PyTorch reference
    expect_greedy_equal(b, g, k25.config.vocab_size, "prompt " + std::to_string(i));
  }
  fs::remove_all(dir);
}

TEST(KimiK25, Int4ExpertsAsShipped) {
  // Routed experts (and the other linear layers) in compressed-tensors INT4 group 32, the
  // quantization_config inside text_config.
  const fs::path int4 = temp_dir("int4_plain");
  QuantizeOptions q;
  q.input = ref_dir();
  q.output = int4;
  q.to = "int4";
  q.group_size = 32;
  Result<QuantizeReport> rep = quantize_checkpoint(q);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  const fs::path dir = wrap_as_kimi_k25(int4, "int4");
  const ModelWeights plain = load_ok(int4);
  const ModelWeights k25 = load_ok(dir);
  ASSERT_EQ(k25.layers[1].expert_gate.size(), 8u);
  EXPECT_EQ(k25.layers[1].expert_gate[0].dtype, DType::kI4);
  EXPECT_EQ(k25.layers[1].expert_gate[0].scale_cols, 32);
  const GoldenPrompt g = golden_prompts()[0];
  EXPECT_EQ(logits_of(plain, g.tokens), logits_of(k25, g.tokens));
  fs::remove_all(dir);
  fs::remove_all(int4);
}

// Moonshot's mix: only the routed experts in INT4 (group 32); attention, the dense first layer's
// MLP, the shared expert, the router and lm_head stay BF16, named by the quantization_config's
// `ignore` patterns as Kimi K2-Thinking / K2.5 publish them. Built from the INT4 checkpoint's
// expert tensors and the BF16 reference's others. The load keeps each tensor's own format, and
// the logits are off the PyTorch reference by less than the all-INT4 load's. (Neither is greedy
// equal: INT4 g32 on this tiny random model moves near-tied logits.)
TEST(KimiK25, Int4RoutedExpertsBf16ElsewhereAsMoonshotShips) {
  const fs::path int4 = temp_dir("int4_all");
  Result<QuantizeReport> rep = quantize_checkpoint(QuantizeOptions{ref_dir(), int4, "int4", 32, ""});
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  const fs::path mixed = temp_dir("int4_mixed_src");
  nlohmann::json cfg = testing::read_json(int4 / "config.json");
  cfg["quantization_config"]["ignore"] = {"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                                          "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*mlp.gate$"};
  std::ofstream(mixed / "config.json") << cfg.dump(2);
  Result<SafetensorsDir> q = SafetensorsDir::open(int4);
  Result<SafetensorsDir> b = SafetensorsDir::open(ref_dir());
  ASSERT_TRUE(q.is_ok() && b.is_ok());
  std::vector<SafetensorsOut> tensors;
  int expert_parts = 0;
  for (const SafetensorsTensor* t : q->all_tensors()) {
    if (t->name.find(".mlp.experts.") == std::string::npos) continue;
    tensors.push_back({t->name, t->dtype_name, t->shape, std::vector<uint8_t>(t->data, t->data + t->nbytes)});
    ++expert_parts;
  }
  for (const SafetensorsTensor* t : b->all_tensors()) {
    if (t->name.find(".mlp.experts.") != std::string::npos) continue;
    tensors.push_back({t->name, t->dtype_name, t->shape, std::vector<uint8_t>(t->data, t->data + t->nbytes)});
  }
  ASSERT_EQ(expert_parts, 2 * 8 * 3 * 3);  // 2 MoE layers x 8 experts x gate/up/down x packed/scale/shape
  ASSERT_TRUE(write_safetensors(mixed / "model.safetensors", tensors).is_ok());
  const fs::path dir = wrap_as_kimi_k25(mixed, "int4_mixed");
  const ModelWeights all_int4 = load_ok(int4);
  const ModelWeights k25 = load_ok(dir);
  const LayerWeights& moe = k25.layers[1];
  ASSERT_EQ(moe.expert_gate.size(), 8u);
  for (const WeightView* w : {&moe.expert_gate[3], &moe.expert_up[3], &moe.expert_down[3]}) {
    EXPECT_EQ(w->dtype, DType::kI4);
    EXPECT_EQ(w->scale_cols, 32);
  }
  EXPECT_EQ(all_int4.layers[1].shared_gate.dtype, DType::kI4);
  EXPECT_NE(moe.shared_gate.dtype, DType::kI4);
  EXPECT_NE(moe.shared_down.dtype, DType::kI4);
  EXPECT_NE(moe.wo.dtype, DType::kI4);
  EXPECT_NE(moe.kv_b.dtype, DType::kI4);
  EXPECT_NE(k25.layers[0].w_down.dtype, DType::kI4);  // the dense first layer
  EXPECT_NE(k25.lm_head.dtype, DType::kI4);
  EXPECT_LT(k25.weight_bytes(), load_ok(ref_dir()).weight_bytes());
  for (const GoldenPrompt& g : golden_prompts()) {
    const std::vector<float> mixed_logits = logits_of(k25, g.tokens);
    const double mixed_err = max_abs_diff(mixed_logits, g.logits);
    const double all_err = max_abs_diff(logits_of(all_int4, g.tokens), g.logits);
    EXPECT_GT(mixed_err, 1e-3);  // the experts are quantized: not the BF16 logits
    EXPECT_LT(mixed_err, all_err);  // measured: about half, on every prompt
  }
  fs::remove_all(dir);
  fs::remove_all(mixed);
  fs::remove_all(int4);
}

TEST(KimiK25, UnknownTensorIsAnErrorNamingIt) {
  const fs::path dir = wrap_as_kimi_k25(ref_dir(), "unknown", true, "language_model.model.extra_thing.weight");
  Result<ModelWeights> r = load_model(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unknown tensor 'language_model.model.extra_thing.weight'"), std::string::npos)
      << r.status().message();
  fs::remove_all(dir);
  // A layer beyond the NextN range is not NextN.
  const fs::path dir2 = wrap_as_kimi_k25(ref_dir(), "unknown2", false, "language_model.model.layers.4.enorm.weight");
  Result<ModelWeights> r2 = load_model(dir2);
  ASSERT_FALSE(r2.is_ok());
  EXPECT_NE(r2.status().message().find("layers.4.enorm"), std::string::npos) << r2.status().message();
  fs::remove_all(dir2);
}

TEST(Glm4MoeLite, PublishedConfig) {
  Result<ModelConfig> c = parse_hf_config(fs::path(DENSA_SOURCE_DIR) / "tests/data/configs/glm-4.7-flash.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_STREQ(c->attention_kind(), "MLA");
  EXPECT_EQ(c->num_layers, 47);
  EXPECT_EQ(c->num_nextn_layers, 1);
  EXPECT_EQ(c->mla.q_lora_rank, 768);
  EXPECT_EQ(c->mla.kv_lora_rank + c->mla.qk_rope_head_dim, 576);
  EXPECT_EQ(c->mla.qk_nope_head_dim, 192);
  EXPECT_EQ(c->mla.v_head_dim, 256);
  EXPECT_EQ(c->num_experts, 64);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_EQ(c->moe_routing, MoeRouting::kSigmoidGrouped);
  EXPECT_FLOAT_EQ(c->routed_scaling_factor, 1.8f);
  EXPECT_EQ(c->shared_expert_intermediate_size, 1536);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->yarn.factor, 0.0f);  // rope_type default
  // A rope type densa does not run, and a malformed mlp_layer_types, are refused by name.
  std::string text = testing::read_text(fs::path(DENSA_SOURCE_DIR) / "tests/data/configs/glm-4.7-flash.json");
  std::string bad = text;
  bad.replace(bad.find("\"default\""), 9, "\"dynamic\"");
  Result<ModelConfig> r = parse_hf_config_text(bad, "flash");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("rope type 'dynamic'"), std::string::npos) << r.status().message();
  bad = text;
  bad.replace(bad.find("\"first_k_dense_replace\""), 0, "\"mlp_layer_types\": [\"dense\"], ");
  r = parse_hf_config_text(bad, "flash");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("mlp_layer_types"), std::string::npos) << r.status().message();
}

TEST(Glm4MoeLite, ComputesTheDeepseekV3Reference) {
  const fs::path dir = wrap_as_glm4_moe_lite("glm4_moe_lite");
  const ModelWeights plain = load_ok(ref_dir());
  const ModelWeights lite = load_ok(dir);
  EXPECT_EQ(lite.config.architecture, "Glm4MoeLiteForCausalLM");
  EXPECT_FLOAT_EQ(lite.config.yarn.factor, 4.0f);
  EXPECT_FLOAT_EQ(lite.config.yarn.mscale_all_dim, 0.8f);
  EXPECT_FALSE(lite.config.is_moe_layer(0));
  EXPECT_TRUE(lite.config.is_moe_layer(1));
  EXPECT_EQ(lite.skipped.nextn_tensors, 2);
  for (const GoldenPrompt& g : golden_prompts()) {
    const std::vector<float> a = logits_of(lite, g.tokens);
    EXPECT_EQ(logits_of(plain, g.tokens), a);
    EXPECT_LT(max_abs_diff(a, g.logits), 1e-3);  // the PyTorch reference
    expect_greedy_equal(a, g, lite.config.vocab_size, "glm4_moe_lite");
  }
  fs::remove_all(dir);
}

// GLM-5 (glm_moe_dsa): the published config (tests/model/glm_moe_dsa_test.cpp runs the tiny one).
TEST(GlmMoeDsa, PublishedConfig) {
  const fs::path cfg = fs::path(DENSA_SOURCE_DIR) / "tests/data/configs/glm-5.json";
  Result<ModelConfig> c = parse_hf_config(cfg);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_STREQ(c->attention_kind(), "MLA+DSA");
  EXPECT_EQ(c->dsa.index_topk, 2048);
  EXPECT_EQ(c->dsa.index_n_heads, 32);
  EXPECT_EQ(c->dsa.index_head_dim, 128);
  EXPECT_EQ(c->num_nextn_layers, 1);
  EXPECT_EQ(c->first_k_dense_replace, 3);
  // The cache: a 576-value latent row plus a 128-byte FP8 index key and its f32 scale.
  const KvLayout l = kv_layout_for(*c, 16, DType::kBF16);
  EXPECT_EQ(l.index_dim, 128);
  EXPECT_EQ(l.page_bytes(), int64_t{78} * 16 * (576 * 2 + 128 + 4));
  // Layers sharing another's top-k are refused by name.
  std::string text = testing::read_text(cfg);
  text.replace(text.find("\"index_topk\""), 0, "\"index_topk_freq\": 4, ");
  Result<ModelConfig> shared = parse_hf_config_text(text, "glm5");
  ASSERT_FALSE(shared.is_ok());
  EXPECT_NE(shared.status().message().find("index_topk_freq"), std::string::npos) << shared.status().message();
}

// GGUF: Kimi-K2.5's text model and GLM-4.7-Flash are written under llama.cpp's deepseek2 (they
// run the DeepSeek-V3 forward, so they read back as DeepseekV3ForCausalLM). A BF16 GGUF of a
// BF16 checkpoint holds the same values: logits bit-identical to the Hugging Face load, within
// the MLA golden bound (1e-3, as above) of the PyTorch reference, greedy equal to its greedy.
class MlaFamilyGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(MlaFamilyGguf, Bf16GgufAsDeepseek2EqualsTheHfLoad) {
  const std::string family = GetParam();
  const fs::path dir = family == "kimi_k25" ? wrap_as_kimi_k25(ref_dir(), "gguf") : wrap_as_glm4_moe_lite("gguf");
  const fs::path out = dir / "model.gguf";
  Result<QuantizeReport> rep = quantize_checkpoint(QuantizeOptions{dir, out, "bf16", 128, ""});
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  Result<GgufFile> f = GgufFile::open(out);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->get_string("general.architecture"), "deepseek2");
  EXPECT_EQ(f->get_int("deepseek2.block_count"), 3);  // the NextN layer is not written
  EXPECT_TRUE(f->has_tensor("blk.0.attn_kv_a_mqa.weight"));
  EXPECT_TRUE(f->has_tensor("blk.2.ffn_gate_exps.weight"));
  for (const GgufTensorInfo& t : f->tensor_infos()) {
    EXPECT_EQ(t.name.find("vision"), std::string::npos) << t.name;
    EXPECT_EQ(t.name.rfind("blk.3.", 0), std::string::npos) << t.name;
  }
  const ModelWeights hf = load_ok(dir);
  const ModelWeights gguf = load_ok(out);
  EXPECT_EQ(gguf.format, "gguf");
  EXPECT_EQ(gguf.config.architecture, "DeepseekV3ForCausalLM");
  EXPECT_EQ(gguf.num_params(), hf.num_params());
  for (int l = 0; l < 3; ++l) EXPECT_EQ(gguf.config.is_moe_layer(l), hf.config.is_moe_layer(l)) << l;
  EXPECT_FLOAT_EQ(gguf.config.yarn.factor, hf.config.yarn.factor);
  EXPECT_NEAR(gguf.config.yarn.mscale_all_dim, hf.config.yarn.mscale_all_dim, 1e-6);
  const nlohmann::json golden = testing::read_json(ref_dir() / "golden.json");
  for (size_t i = 0; i < golden["prompts"].size(); ++i) {
    const auto prompt = golden["prompts"][i]["prompt_ids"].get<std::vector<TokenId>>();
    const auto want = golden["prompts"][i]["greedy_ids"].get<std::vector<TokenId>>();
    std::vector<TokenId> tokens = prompt;
    tokens.insert(tokens.end(), want.begin(), want.end());
    const std::vector<float> a = logits_of(gguf, tokens);
    EXPECT_TRUE(a == logits_of(hf, tokens)) << family << " prompt " << i << ": GGUF and HF logits differ";
    const std::vector<float> ref = testing::read_binary<float>(ref_dir() / ("prompt" + std::to_string(i) + ".logits.f32.bin"));
    ASSERT_EQ(a.size(), ref.size());
    double diff = 0;
    for (size_t k = 0; k < a.size(); ++k) diff = std::max(diff, std::fabs(double(a[k]) - ref[k]));
    EXPECT_LT(diff, 1e-3) << family << " prompt " << i;
    GenerateOptions o;
    o.max_new_tokens = static_cast<int>(want.size());
    o.sampling.temperature = 0.0f;
    o.stop_at_eos = false;
    EXPECT_EQ(generate(gguf, prompt, o, &pool(), [](TokenId, std::span<const float>) { return true; }), want)
        << family << " prompt " << i;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, MlaFamilyGguf, ::testing::Values(std::string("kimi_k25"), std::string("glm4_moe_lite")),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace densa
