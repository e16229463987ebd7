#include "tools/model_files/gen_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include <unistd.h>

#include "model/model_loader.h"
#include "quality/generator.h"
#include "quant/dequantize.h"
#include "quant/quantize_matrix.h"
#include "test_util.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

class GenModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("densa_gen_model_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A tiny Mixtral (or Llama with experts = 0): every matrix dimension a multiple of 128 so
  // FP8 blocks and INT4 groups fit.
  GenModelOptions tiny(bool moe, const std::string& dtype, const std::string& format, const std::string& name) {
    GenModelOptions o;
    o.arch = moe ? "mixtral" : "llama";
    o.hidden_size = 128;
    o.num_layers = 2;
    o.num_heads = 4;
    o.num_kv_heads = 2;
    o.intermediate_size = 256;
    o.num_experts = moe ? 4 : 0;
    o.num_experts_per_tok = moe ? 2 : 0;
    o.vocab_size = 384;
    o.max_context = 512;
    o.dtype = dtype;
    o.format = format;
    o.seed = 7;
    o.output = dir_ / name;
    return o;
  }

  ModelWeights make(const GenModelOptions& o) {
    Result<GenModelReport> r = generate_model(o);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    Result<ModelWeights> w = load_model(o.output);
    EXPECT_TRUE(w.is_ok()) << w.status().message();
    return std::move(w.value());
  }

  fs::path dir_;
};

std::vector<float> values(const WeightView& w) { return dequantize_matrix(w); }

void expect_same(const std::string& what, const WeightView& a, const WeightView& b) {
  ASSERT_EQ(a.rows, b.rows) << what;
  ASSERT_EQ(a.cols, b.cols) << what;
  const std::vector<float> x = values(a), y = values(b);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << what << " differs";
}

// Calls fn(name, a, b) for every matrix pair of two models of the same shape.
template <typename Fn>
void each_matrix_pair(const ModelWeights& a, const ModelWeights& b, bool with_embeddings, Fn fn) {
  if (with_embeddings) {
    fn("tok_embeddings", a.tok_embeddings, b.tok_embeddings);
    fn("lm_head", a.lm_head, b.lm_head);
  }
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights &x = a.layers[i], &y = b.layers[i];
    const std::string p = "layer " + std::to_string(i) + " ";
    fn(p + "wq", x.wq, y.wq);
    fn(p + "wk", x.wk, y.wk);
    fn(p + "wv", x.wv, y.wv);
    fn(p + "wo", x.wo, y.wo);
    if (!x.w_gate.empty()) {
      fn(p + "w_gate", x.w_gate, y.w_gate);
      fn(p + "w_up", x.w_up, y.w_up);
      fn(p + "w_down", x.w_down, y.w_down);
    }
    if (with_embeddings && !x.router.empty()) fn(p + "router", x.router, y.router);
    ASSERT_EQ(x.expert_gate.size(), y.expert_gate.size());
    for (size_t e = 0; e < x.expert_gate.size(); ++e) {
      const std::string q = p + "expert " + std::to_string(e) + " ";
      fn(q + "gate", x.expert_gate[e], y.expert_gate[e]);
      fn(q + "up", x.expert_up[e], y.expert_up[e]);
      fn(q + "down", x.expert_down[e], y.expert_down[e]);
    }
  }
}

TEST(GenModelPresetTest, ParameterCountsOfThePresets) {
  GenModelOptions o;
  ASSERT_TRUE(apply_gen_model_preset("dense-336m", o).is_ok());
  Result<ModelConfig> dense = gen_model_config(o);
  ASSERT_TRUE(dense.is_ok()) << dense.status().message();
  // 2 x 32000 x 1024 embeddings/head + 1024 final norm + 24 x (attention 2,621,440 + norms
  // 2,048 + SwiGLU 3 x 1024 x 2816).
  EXPECT_EQ(count_total_params(*dense), 336'118'784);
  EXPECT_EQ(count_active_params(*dense), 336'118'784);
  ASSERT_TRUE(apply_gen_model_preset("moe-959m-a336m", o).is_ok());
  Result<ModelConfig> moe = gen_model_config(o);
  ASSERT_TRUE(moe.is_ok()) << moe.status().message();
  EXPECT_TRUE(moe->is_moe());
  EXPECT_EQ(moe->num_experts, 8);
  EXPECT_EQ(moe->num_experts_per_tok, 2);
  // Experts: 8 x 3 x 1024 x 1408 per layer, router 8 x 1024; active keeps 2 of the 8.
  EXPECT_EQ(count_total_params(*moe), 959'169'536);
  EXPECT_EQ(count_active_params(*moe), 336'315'392);
  EXPECT_FALSE(apply_gen_model_preset("dense-7b", o).is_ok());
}

TEST_F(GenModelTest, TinyMoeGgufLoadsRunsAndCountsMatch) {
  const GenModelOptions o = tiny(true, "f32", "gguf", "moe.gguf");
  Result<GenModelReport> r = generate_model(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  Result<ModelWeights> loaded = load_model(o.output);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  const ModelWeights& w = loaded.value();
  const ModelConfig& c = w.config;
  EXPECT_EQ(c.architecture, "MixtralForCausalLM");
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.num_experts, 4);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.vocab_size, 384);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(w.tokenizer, nullptr);
  EXPECT_EQ(w.num_params(), r->total_params);
  EXPECT_EQ(r->total_params, count_total_params(c));
  EXPECT_LT(r->active_params, r->total_params);
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(o.output)), r->bytes_written);

  // The forward pass runs and stays finite; the logits are not constant.
  std::vector<TokenId> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 1) % c.vocab_size);
  const std::vector<float> logits = prompt_logits(w, prompt, DType::kF32, nullptr);
  ASSERT_EQ(logits.size(), prompt.size() * static_cast<size_t>(c.vocab_size));
  float lo = logits[0], hi = logits[0];
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 1.0f);
  EXPECT_LT(hi - lo, 100.0f);
}

TEST_F(GenModelTest, HfConfigKeys) {
  const GenModelOptions o = tiny(true, "bf16", "hf", "moe-hf");
  ASSERT_TRUE(generate_model(o).is_ok());
  const nlohmann::json j = densa::testing::read_json(o.output / "config.json");
  EXPECT_EQ(j["architectures"][0], "MixtralForCausalLM");
  EXPECT_EQ(j["model_type"], "mixtral");
  EXPECT_EQ(j["hidden_size"], 128);
  EXPECT_EQ(j["intermediate_size"], 256);
  EXPECT_EQ(j["num_hidden_layers"], 2);
  EXPECT_EQ(j["num_attention_heads"], 4);
  EXPECT_EQ(j["num_key_value_heads"], 2);
  EXPECT_EQ(j["num_local_experts"], 4);
  EXPECT_EQ(j["num_experts_per_tok"], 2);
  EXPECT_EQ(j["vocab_size"], 384);
  EXPECT_EQ(j["max_position_embeddings"], 512);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["torch_dtype"], "bfloat16");
  EXPECT_FALSE(j.contains("quantization_config"));
  EXPECT_FALSE(fs::exists(o.output / "tokenizer.model"));

  const GenModelOptions d = tiny(false, "int4", "hf", "dense-int4");
  ASSERT_TRUE(generate_model(d).is_ok());
  const nlohmann::json k = densa::testing::read_json(d.output / "config.json");
  EXPECT_EQ(k["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(k["model_type"], "llama");
  EXPECT_FALSE(k.contains("num_local_experts"));
  EXPECT_EQ(k["quantization_config"]["quant_method"], "compressed-tensors");
  EXPECT_EQ(k["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"], 32);
}

// Same options and seed: the GGUF file and the HF directory load to the same values, for
// every float type (GGUF's permuted Q/K rows and stacked experts undone by the loader).
TEST_F(GenModelTest, GgufAndHfLoadToIdenticalWeights) {
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    for (bool moe : {false, true}) {
      SCOPED_TRACE(std::string(dtype) + (moe ? " moe" : " dense"));
      const std::string tag = std::string(dtype) + (moe ? "-moe" : "-dense");
      const ModelWeights g = make(tiny(moe, dtype, "gguf", tag + ".gguf"));
      const ModelWeights h = make(tiny(moe, dtype, "hf", tag + "-hf"));
      EXPECT_EQ(g.config.num_experts, h.config.num_experts);
      EXPECT_EQ(g.config.head_dim, h.config.head_dim);
      each_matrix_pair(g, h, true, expect_same);
      EXPECT_EQ(g.final_norm, h.final_norm);
      EXPECT_EQ(g.layers[1].attn_norm, h.layers[1].attn_norm);
    }
  }
}

// --tokenizer bytes: a byte-level vocabulary every text round-trips through as byte tokens.
TEST_F(GenModelTest, ByteVocabularyLoadsAndRoundTripsText) {
  GenModelOptions o = tiny(false, "q8_0", "gguf", "vocab.gguf");
  o.tokenizer = "bytes";
  const ModelWeights w = make(o);
  ASSERT_NE(w.tokenizer, nullptr);
  const Tokenizer& t = *w.tokenizer;
  ASSERT_EQ(t.vocab_size(), 384);
  EXPECT_TRUE(t.byte_fallback());
  EXPECT_EQ(t.vocab().pieces[0], "<unk>");
  EXPECT_EQ(t.vocab().pieces[1], "<s>");
  EXPECT_EQ(t.vocab().pieces[2], "</s>");
  EXPECT_EQ(t.vocab().pieces[3 + 'A'], "<0x41>");
  EXPECT_EQ(t.vocab().pieces[259], "\xe2\x96\x81");
  EXPECT_EQ(t.vocab().pieces[260], "\xe2\x96\x81" "densa260");
  const std::string text = "Once upon a time, wörld 42!";
  const std::vector<TokenId> ids = t.encode(text, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_GE(ids[i], 3);
    EXPECT_LE(ids[i], 259) << "token " << i << " is neither a byte token nor \"▁\"";
  }
  EXPECT_EQ(t.decode(ids), text);
  // The filler pieces decode as text, so a random model's output is printable.
  const std::vector<TokenId> filler = {300};
  EXPECT_EQ(t.decode(filler), "densa300");
  // The same options without the flag write no vocabulary.
  o.tokenizer = "none";
  o.output = dir_ / "plain.gguf";
  EXPECT_EQ(make(o).tokenizer, nullptr);
}

// Quantized checkpoints hold what quantize-on-load makes of the BF16 checkpoint.
TEST_F(GenModelTest, QuantizedCheckpointsEqualQuantizeOnLoad) {
  const GenModelOptions bf16 = tiny(true, "bf16", "hf", "base-hf");
  ASSERT_TRUE(generate_model(bf16).is_ok());
  struct Case { const char* dtype; const char* format; DType load; };
  for (const Case& k : {Case{"q8_0", "gguf", DType::kQ8_0}, Case{"q4_0", "gguf", DType::kQ4_0},
                        Case{"fp8", "hf", DType::kFP8E4M3}, Case{"int4", "hf", DType::kI4}}) {
    SCOPED_TRACE(k.dtype);
    const ModelWeights q = make(tiny(true, k.dtype, k.format, std::string(k.dtype) + "." + k.format));
    Result<ModelWeights> ref = load_model(bf16.output, LoadOptions{k.load, 32});
    ASSERT_TRUE(ref.is_ok()) << ref.status().message();
    // Q4_0 / Q8_0 are held repacked for the VNNI kernels (LoadOptions::prepare_for_kernels), same values.
    const DType held = k.load == DType::kQ4_0 ? DType::kI4 : k.load == DType::kQ8_0 ? DType::kI8 : k.load;
    EXPECT_EQ(q.layers[0].wq.dtype, held);
    EXPECT_EQ(q.layers[1].expert_down[3].dtype, held);
    each_matrix_pair(q, ref.value(), false, expect_same);
  }
}

// --lm-head-dtype: the head is written in its own format, loads back as it, and holds what
// quantize-on-load of the BF16 checkpoint's head makes (HF INT4 / FP8 through the checkpoint's
// one quantization_config; GGUF any type).
TEST_F(GenModelTest, LmHeadDtypeWritesAQuantizedHeadTheLoaderReads) {
  const GenModelOptions bf16 = tiny(true, "bf16", "hf", "base-hf");
  ASSERT_TRUE(generate_model(bf16).is_ok());
  struct Case { const char* dtype; const char* format; const char* head; DType body; DType head_dtype; };
  for (const Case& k : {Case{"int4", "hf", "int4", DType::kI4, DType::kI4},
                        Case{"fp8", "hf", "fp8", DType::kFP8E4M3, DType::kFP8E4M3},
                        Case{"int4", "hf", "bf16", DType::kI4, DType::kBF16},
                        Case{"q4_0", "gguf", "q8_0", DType::kQ4_0, DType::kQ8_0}}) {
    SCOPED_TRACE(std::string(k.dtype) + " head " + k.head);
    GenModelOptions o = tiny(true, k.dtype, k.format, std::string(k.dtype) + "-" + k.head + "." + k.format);
    o.lm_head_dtype = k.head;
    const ModelWeights q = make(o);
    EXPECT_EQ(q.layers[0].wq.dtype, k.body == DType::kQ4_0 ? DType::kI4 : k.body);  // Q4_0 repacked at load
    ASSERT_EQ(q.lm_head.dtype, k.head_dtype == DType::kQ8_0 ? DType::kI8 : k.head_dtype);  // Q8_0 repacked at load
    if (k.head_dtype == DType::kI4) {
      EXPECT_EQ(q.lm_head.scale_cols, 32);
    }
    EXPECT_EQ(q.tok_embeddings.dtype, std::string(k.format) == "hf" ? DType::kBF16 : DType::kQ4_0);
    Result<ModelWeights> ref = load_model(bf16.output, LoadOptions{k.body, 32, WeightQuantSpec{k.head_dtype, 32}});
    ASSERT_TRUE(ref.is_ok()) << ref.status().message();
    expect_same("lm_head", q.lm_head, ref->lm_head);
    each_matrix_pair(q, ref.value(), false, expect_same);
    if (std::string(k.format) == "hf") {
      const auto ignore = testing::read_json(o.output / "config.json")["quantization_config"]["ignore"];
      const bool ignored = std::find(ignore.begin(), ignore.end(), "lm_head") != ignore.end();
      EXPECT_EQ(ignored, k.head_dtype == DType::kBF16) << ignore.dump();
    }
  }
  GenModelOptions bad = tiny(false, "fp8", "hf", "bad");
  bad.lm_head_dtype = "int4";
  Result<GenModelReport> r = generate_model(bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--lm-head-dtype 'int4': a Hugging Face lm_head is f32, f16, bf16 or the --dtype "
                                      "format (fp8"),
            std::string::npos)
      << r.status().message();
  bad = tiny(false, "q4_0", "gguf", "bad.gguf");
  bad.lm_head_dtype = "fp8";
  r = generate_model(bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("a GGUF lm_head is f32, f16, bf16, q8_0 or q4_0"), std::string::npos)
      << r.status().message();
}

TEST_F(GenModelTest, RoutingSpreadsOverExperts) {
  const ModelWeights w = make(tiny(true, "bf16", "gguf", "route.gguf"));
  std::vector<TokenId> prompt;
  for (int i = 0; i < 64; ++i) prompt.push_back((i * 101 + 3) % w.config.vocab_size);
  // Layer 0's router on the normed embeddings: with router logits ~N(0,1) every expert is
  // the top choice of some token.
  std::set<int> top1;
  const ModelConfig& c = w.config;
  const std::vector<float> r = dequantize_matrix(w.layers[0].router);
  for (TokenId t : prompt) {
    std::vector<float> x(static_cast<size_t>(c.hidden_size));
    dequantize_row(w.tok_embeddings, t, x.data());
    float ss = 0;
    for (float v : x) ss += v * v;
    const float inv = 1.0f / std::sqrt(ss / c.hidden_size + c.rms_norm_eps);
    int best = 0;
    float best_v = -1e30f;
    for (int e = 0; e < c.num_experts; ++e) {
      float dot = 0;
      for (int j = 0; j < c.hidden_size; ++j) dot += r[e * c.hidden_size + j] * x[j] * inv * w.layers[0].attn_norm[j];
      if (dot > best_v) best_v = dot, best = e;
    }
    top1.insert(best);
  }
  EXPECT_EQ(static_cast<int>(top1.size()), c.num_experts);
}

TEST_F(GenModelTest, BadOptionsAreClearErrors) {
  GenModelOptions o = tiny(false, "fp8", "gguf", "x.gguf");
  Result<GenModelReport> r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--format hf"), std::string::npos) << r.status().message();
  o = tiny(false, "q4_0", "hf", "x");
  EXPECT_FALSE(generate_model(o).is_ok());
  o = tiny(false, "bf16", "gguf", "x.gguf");
  o.num_heads = 3;
  r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--heads"), std::string::npos) << r.status().message();
  o = tiny(false, "q8_0", "gguf", "x.gguf");
  o.hidden_size = 100;
  o.num_heads = 2;
  o.num_kv_heads = 2;
  r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("cannot be stored as q8_0"), std::string::npos) << r.status().message();
  o = tiny(false, "bf16", "hf", "x");
  o.tokenizer = "bytes";
  r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("GGUF files only"), std::string::npos) << r.status().message();
  o = tiny(false, "bf16", "gguf", "x.gguf");
  o.tokenizer = "bytes";
  o.vocab_size = 259;
  r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--vocab >= 260"), std::string::npos) << r.status().message();
  // Anything but none / bytes names a tokenizer directory, which must exist (either format).
  o = tiny(false, "bf16", "gguf", "x.gguf");
  o.tokenizer = "bpe";
  r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("bpe: not a directory"), std::string::npos) << r.status().message();
  // The new families' own constraints.
  o = tiny(true, "bf16", "hf", "x-ds");
  o.arch = "deepseek_v3";
  o.n_group = 3;  // 4 experts do not split into 3 groups
  r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--expert-groups 3"), std::string::npos) << r.status().message();
  o.n_group = 1;
  o.qk_rope_head_dim = 7;
  r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("even --qk-rope-dim"), std::string::npos) << r.status().message();
  o = tiny(false, "bf16", "hf", "x-q");
  o.arch = "qwen3_moe";
  r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("qwen3_moe needs --experts"), std::string::npos) << r.status().message();
  o = tiny(false, "bf16", "hf", "x-hf");
  o.tokenizer = "bpe";
  r = generate_model(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("bpe: not a directory"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace densa
