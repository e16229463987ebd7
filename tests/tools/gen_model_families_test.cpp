// gen-model's Qwen3-MoE and DeepSeek-V3 shapes: the Hugging Face directory carries the real
// config keys and tensor names of qwen3_moe / deepseek_v3, the GGUF llama.cpp's (qwen3moe /
// deepseek2: metadata keys, attn_q_norm, exp_probs_b.bias, *_shexp, attn_k_b / attn_v_b and no
// attn_kv_b, as llama.cpp's converter writes), and the engine loads both forms of the same
// options and seed to the same model.
//
// Tolerances: BF16 files hold the same bytes, so Qwen3-MoE's logits are bit-identical; the
// deepseek2 GGUF has only the split attn_k_b / attn_v_b, from which the loader rebuilds kv_b
// in F32: |dlogit| <= 1e-5 vs the HF load (the bound tests/arch/moe_gguf_test.cpp uses for
// such files). Greedy continuations are equal in both cases.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "io/gguf_file.h"
#include "io/safetensors.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "test_util.h"
#include "tools/model_files/gen_model.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path d = fs::temp_directory_path() /
               ("densa_gen_family_" + std::to_string(::getpid()) + "_" + info->name() + "_" + name);
  fs::remove_all(d);
  return d;
}

// Small shapes of each family.
GenModelOptions family(const std::string& arch, const std::string& format, const fs::path& out) {
  GenModelOptions o;
  o.arch = arch;
  o.hidden_size = 128;
  o.num_layers = 3;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.intermediate_size = 192;
  o.moe_intermediate_size = 64;
  o.num_experts = 8;
  o.num_experts_per_tok = 2;
  o.vocab_size = 512;
  o.max_context = 512;
  if (arch == "qwen3_moe") o.head_dim = 48;  // Qwen3 sets head_dim apart from hidden / heads
  if (arch == "deepseek_v3") {
    o.num_shared_experts = 1;
    o.first_k_dense_replace = 1;
    o.n_group = 4;
    o.topk_group = 2;
    o.q_lora_rank = 64;
    o.kv_lora_rank = 32;
    o.qk_nope_head_dim = 32;
    o.qk_rope_head_dim = 16;
    o.v_head_dim = 32;
  }
  o.dtype = "bf16";
  o.format = format;
  o.seed = 11;
  o.output = out;
  return o;
}

ModelWeights load(const fs::path& p) {
  Result<ModelWeights> w = load_model(p);
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  return std::move(w).value();
}

std::vector<TokenId> prompt(int vocab) {
  std::vector<TokenId> p;
  for (int i = 0; i < 24; ++i) p.push_back((i * 131 + 7) % vocab);
  return p;
}

std::vector<TokenId> greedy(const ModelWeights& w, const std::vector<TokenId>& p) {
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.sampling.temperature = 0.0f;
  o.stop_at_eos = false;
  return generate(w, p, o, nullptr, [](TokenId, std::span<const float>) { return true; });
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

TEST(GenModelFamilies, Qwen3MoeHfKeysAndNames) {
  const fs::path dir = scratch("hf");
  auto r = generate_model(family("qwen3_moe", "hf", dir));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const nlohmann::json j = testing::read_json(dir / "config.json");
  EXPECT_EQ(j["architectures"][0], "Qwen3MoeForCausalLM");
  EXPECT_EQ(j["model_type"], "qwen3_moe");
  EXPECT_EQ(j["num_experts"], 8);
  EXPECT_EQ(j["num_experts_per_tok"], 2);
  EXPECT_EQ(j["moe_intermediate_size"], 64);
  EXPECT_EQ(j["head_dim"], 48);
  EXPECT_EQ(j["norm_topk_prob"], true);
  EXPECT_EQ(j["decoder_sparse_step"], 1);
  EXPECT_FALSE(j.contains("n_shared_experts"));
  auto st = SafetensorsFile::open(dir / "model.safetensors");
  ASSERT_TRUE(st.is_ok()) << st.status().to_string();
  for (const char* name : {"model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight",
                           "model.layers.2.mlp.gate.weight", "model.layers.2.mlp.experts.7.down_proj.weight"}) {
    EXPECT_TRUE((st->find(name) != nullptr)) << name;
  }
  EXPECT_FALSE((st->find("model.layers.0.mlp.shared_experts.gate_proj.weight") != nullptr));
  const ModelWeights w = load(dir);
  const ModelConfig& c = w.config;
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.head_dim, 48);
  EXPECT_EQ(c.moe_routing, MoeRouting::kSoftmaxTopK);
  EXPECT_EQ(c.shared_expert_intermediate_size, 0);
  for (int i = 0; i < c.num_layers; ++i) EXPECT_TRUE(c.is_moe_layer(i));
  EXPECT_EQ(w.num_params(), r->total_params);
  // 8 experts x 3 x 128 x 64 per layer; each token uses 2 of them.
  EXPECT_EQ(r->total_params - r->active_params, 3 * 6 * 3 * 128 * 64);
  fs::remove_all(dir);
}

TEST(GenModelFamilies, DeepSeekV3HfKeysAndNames) {
  const fs::path dir = scratch("hf");
  auto r = generate_model(family("deepseek_v3", "hf", dir));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const nlohmann::json j = testing::read_json(dir / "config.json");
  EXPECT_EQ(j["architectures"][0], "DeepseekV3ForCausalLM");
  EXPECT_EQ(j["model_type"], "deepseek_v3");
  EXPECT_EQ(j["q_lora_rank"], 64);
  EXPECT_EQ(j["kv_lora_rank"], 32);
  EXPECT_EQ(j["qk_nope_head_dim"], 32);
  EXPECT_EQ(j["qk_rope_head_dim"], 16);
  EXPECT_EQ(j["v_head_dim"], 32);
  EXPECT_EQ(j["n_routed_experts"], 8);
  EXPECT_EQ(j["n_shared_experts"], 1);
  EXPECT_EQ(j["first_k_dense_replace"], 1);
  EXPECT_EQ(j["n_group"], 4);
  EXPECT_EQ(j["topk_group"], 2);
  EXPECT_EQ(j["topk_method"], "noaux_tc");
  EXPECT_EQ(j["scoring_func"], "sigmoid");
  EXPECT_EQ(j["routed_scaling_factor"], 2.5);
  auto st = SafetensorsFile::open(dir / "model.safetensors");
  ASSERT_TRUE(st.is_ok()) << st.status().to_string();
  for (const char* name : {"model.layers.0.mlp.gate_proj.weight", "model.layers.1.self_attn.q_a_proj.weight",
                           "model.layers.1.self_attn.q_a_layernorm.weight", "model.layers.1.self_attn.q_b_proj.weight",
                           "model.layers.1.self_attn.kv_a_proj_with_mqa.weight",
                           "model.layers.1.self_attn.kv_a_layernorm.weight", "model.layers.1.self_attn.kv_b_proj.weight",
                           "model.layers.1.mlp.gate.weight", "model.layers.1.mlp.gate.e_score_correction_bias",
                           "model.layers.1.mlp.shared_experts.up_proj.weight", "model.layers.2.mlp.experts.7.up_proj.weight"}) {
    EXPECT_TRUE((st->find(name) != nullptr)) << name;
  }
  EXPECT_FALSE((st->find("model.layers.0.mlp.gate.weight") != nullptr));  // the leading dense layer
  auto bias = st->tensor("model.layers.1.mlp.gate.e_score_correction_bias");
  ASSERT_TRUE(bias.is_ok());
  EXPECT_EQ(*bias->dtype, DType::kF32);
  const ModelWeights w = load(dir);
  const ModelConfig& c = w.config;
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.moe_routing, MoeRouting::kSigmoidGrouped);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_EQ(c.shared_expert_intermediate_size, 64);
  EXPECT_EQ(c.n_group, 4);
  EXPECT_EQ(c.topk_group, 2);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_EQ(w.layers[1].router_bias.size(), 8u);
  EXPECT_NE(w.layers[1].router_bias[0], w.layers[1].router_bias[1]);
  EXPECT_EQ(w.num_params(), r->total_params);
  fs::remove_all(dir);
}

TEST(GenModelFamilies, GgufUsesLlamaCppArchKeysAndNames) {
  struct Case { const char* arch; const char* gguf_arch; };
  for (const Case& k : {Case{"qwen3_moe", "qwen3moe"}, Case{"deepseek_v3", "deepseek2"}}) {
    SCOPED_TRACE(k.arch);
    const fs::path path = scratch(std::string(k.arch) + ".gguf");
    auto r = generate_model(family(k.arch, "gguf", path));
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    const std::string a = k.gguf_arch;
    EXPECT_EQ(f->get_string("general.architecture"), a);
    EXPECT_EQ(f->get_int(a + ".expert_count"), 8);
    EXPECT_EQ(f->get_int(a + ".expert_used_count"), 2);
    EXPECT_EQ(f->get_int(a + ".expert_feed_forward_length"), 64);
    EXPECT_TRUE(f->has_tensor("blk.2.ffn_gate_exps.weight"));
    EXPECT_TRUE(f->has_tensor("blk.2.ffn_gate_inp.weight"));
    if (a == "qwen3moe") {
      EXPECT_EQ(f->get_int(a + ".attention.key_length"), 48);
      EXPECT_TRUE(f->has_tensor("blk.0.attn_q_norm.weight"));
      EXPECT_TRUE(f->has_tensor("blk.0.attn_k_norm.weight"));
      EXPECT_FALSE(f->has_tensor("blk.0.ffn_gate_shexp.weight"));
    } else {
      EXPECT_EQ(f->get_int(a + ".attention.q_lora_rank"), 64);
      EXPECT_EQ(f->get_int(a + ".attention.kv_lora_rank"), 32);
      EXPECT_EQ(f->get_int(a + ".attention.key_length_mla"), 48);
      EXPECT_EQ(f->get_int(a + ".attention.value_length_mla"), 32);
      EXPECT_EQ(f->get_int(a + ".leading_dense_block_count"), 1);
      EXPECT_EQ(f->get_int(a + ".expert_shared_count"), 1);
      EXPECT_EQ(f->get_int(a + ".expert_group_count"), 4);
      EXPECT_EQ(f->get_int(a + ".expert_group_used_count"), 2);
      EXPECT_EQ(f->get_int(a + ".expert_gating_func"), 2);  // sigmoid
      EXPECT_NEAR(f->get_float(a + ".expert_weights_scale").value_or(0), 2.5, 1e-6);
      EXPECT_TRUE(f->has_tensor("blk.0.ffn_gate.weight"));
      EXPECT_FALSE(f->has_tensor("blk.0.ffn_gate_inp.weight"));
      for (const char* t : {"blk.1.attn_q_a.weight", "blk.1.attn_q_a_norm.weight", "blk.1.attn_q_b.weight",
                            "blk.1.attn_kv_a_mqa.weight", "blk.1.attn_kv_a_norm.weight", "blk.1.attn_k_b.weight",
                            "blk.1.attn_v_b.weight", "blk.1.exp_probs_b.bias", "blk.1.ffn_up_shexp.weight"}) {
        EXPECT_TRUE(f->has_tensor(t)) << t;
      }
      EXPECT_FALSE(f->has_tensor("blk.1.attn_kv_b.weight"));  // llama.cpp's converter writes only the split
      auto kb = f->tensor("blk.1.attn_k_b.weight");
      ASSERT_TRUE(kb.is_ok());
      EXPECT_EQ(kb->ne, (std::vector<int64_t>{32, 32, 4}));  // [nope, kv_lora, heads], ne0 first
      auto vb = f->tensor("blk.1.attn_v_b.weight");
      ASSERT_TRUE(vb.is_ok());
      EXPECT_EQ(vb->ne, (std::vector<int64_t>{32, 32, 4}));  // [kv_lora, v, heads]
    }
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), r->bytes_written);
    fs::remove(path);
  }
}

// The same options and seed as HF and as GGUF: same config, parameter count, logits (within
// the stated tolerance) and greedy continuation.
TEST(GenModelFamilies, HfAndGgufFormsAgree) {
  for (const char* arch : {"qwen3_moe", "deepseek_v3"}) {
    SCOPED_TRACE(arch);
    const bool mla = std::string(arch) == "deepseek_v3";
    const fs::path hf = scratch(std::string(arch) + "-hf"), gguf = scratch(std::string(arch) + ".gguf");
    ASSERT_TRUE(generate_model(family(arch, "hf", hf)).is_ok());
    auto rg = generate_model(family(arch, "gguf", gguf));
    ASSERT_TRUE(rg.is_ok()) << rg.status().to_string();
    const ModelWeights h = load(hf), g = load(gguf);
    EXPECT_EQ(g.config.architecture, h.config.architecture);
    EXPECT_EQ(g.config.num_layers, h.config.num_layers);
    EXPECT_EQ(g.config.head_dim, h.config.head_dim);
    EXPECT_EQ(g.config.qk_norm, h.config.qk_norm);
    EXPECT_EQ(g.config.norm_topk_prob, h.config.norm_topk_prob);
    EXPECT_EQ(g.config.first_k_dense_replace, h.config.first_k_dense_replace);
    EXPECT_EQ(g.config.shared_expert_intermediate_size, h.config.shared_expert_intermediate_size);
    EXPECT_EQ(g.config.n_group, h.config.n_group);
    EXPECT_EQ(g.config.topk_group, h.config.topk_group);
    EXPECT_EQ(g.config.routed_scaling_factor, h.config.routed_scaling_factor);
    EXPECT_EQ(g.config.mla.q_lora_rank, h.config.mla.q_lora_rank);
    EXPECT_EQ(g.config.mla.kv_lora_rank, h.config.mla.kv_lora_rank);
    EXPECT_EQ(g.config.rope_theta, h.config.rope_theta);
    EXPECT_EQ(g.config.rms_norm_eps, h.config.rms_norm_eps);
    EXPECT_EQ(g.num_params(), h.num_params());
    EXPECT_EQ(g.num_params(), rg->total_params);
    const std::vector<TokenId> p = prompt(h.config.vocab_size);
    const std::vector<float> lh = prompt_logits(h, p, DType::kF32, nullptr), lg = prompt_logits(g, p, DType::kF32, nullptr);
    const double d = max_abs_diff(lh, lg);
    std::printf("[ note ] %s: HF vs GGUF max |dlogit| %.2e\n", arch, d);
    if (mla) {
      EXPECT_LE(d, 1e-5);
    } else {
      EXPECT_EQ(d, 0.0);
    }
    float lo = lh[0], hi = lh[0];
    for (float v : lh) {
      ASSERT_TRUE(std::isfinite(v));
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_GT(hi - lo, 1.0f);  // not a constant model
    const std::vector<TokenId> gh = greedy(h, p), gg = greedy(g, p);
    EXPECT_EQ(gh.size(), 12u);
    EXPECT_EQ(gh, gg);

    fs::remove_all(hf);
    fs::remove(gguf);
  }
}

// A real vocabulary in both forms: Qwen3's tokenizer for qwen3_moe and DeepSeek-V3's for
// deepseek_v3 (the test oracles); the GGUF carries it as tokenizer.ggml.* with its template,
// and both load to tokenizers that encode alike.
TEST(GenModelFamilies, RealTokenizerInBothForms) {
  struct Case { const char* arch; const char* tokenizer; int vocab; const char* pre; };
  for (const Case& k : {Case{"qwen3_moe", "qwen3", 151669, "qwen2"}, Case{"deepseek_v3", "deepseek_v3", 128815, "deepseek-v3"}}) {
    SCOPED_TRACE(k.arch);
    const fs::path src = testing::real_tokenizer_dir(k.tokenizer);
    ASSERT_TRUE(fs::exists(src / "tokenizer.json")) << src << " (the build installs the test oracles)";
    GenModelOptions o = family(k.arch, "hf", scratch(std::string(k.arch) + "-hf"));
    o.hidden_size = 64;
    o.num_layers = 2;
    o.num_heads = 2;
    o.num_kv_heads = 1;
    o.head_dim = 0;
    if (std::string(k.arch) == "deepseek_v3") {
      o.q_lora_rank = 32;
      o.kv_lora_rank = 32;
    }
    o.tokenizer = src.string();
    auto rh = generate_model(o);
    ASSERT_TRUE(rh.is_ok()) << rh.status().to_string();
    GenModelOptions og = o;
    og.format = "gguf";
    og.output = scratch(std::string(k.arch) + ".gguf");
    auto rg = generate_model(og);
    ASSERT_TRUE(rg.is_ok()) << rg.status().to_string();
    EXPECT_EQ(rh->config.vocab_size, k.vocab);
    EXPECT_EQ(rg->config.vocab_size, k.vocab);
    auto f = GgufFile::open(og.output);
    ASSERT_TRUE(f.is_ok());
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), k.pre);
    EXPECT_EQ(f->find("tokenizer.ggml.tokens")->strings.size(), static_cast<size_t>(k.vocab));
    const std::string tmpl = f->get_string("tokenizer.chat_template").value_or("");
    EXPECT_FALSE(tmpl.empty());
    const ModelWeights h = load(o.output), g = load(og.output);
    ASSERT_NE(h.tokenizer, nullptr);
    ASSERT_NE(g.tokenizer, nullptr);
    EXPECT_EQ(g.chat_template, h.chat_template);
    EXPECT_EQ(g.chat_template, tmpl);
    EXPECT_EQ(g.config.eos_token_id, h.config.eos_token_id);
    for (const std::string s : {"Hello, world! 123 4567", "  spaces\n\ttabs  ", "中文 и русский 🐈‍⬛",
                                "<|im_end|> <｜end▁of▁sentence｜> def f(x):\n    return x**2"}) {
      for (bool special : {false, true}) {
        EXPECT_EQ(g.tokenizer->encode(s, special), h.tokenizer->encode(s, special)) << s << " special " << special;
      }
    }
    fs::remove_all(o.output);
    fs::remove(og.output);
  }
}

}  // namespace
}  // namespace densa
