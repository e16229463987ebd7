#include "model/model_loader.h"

#include <gtest/gtest.h>

#include <functional>

#include "io/gguf_file.h"
#include "io/test_file_writers.h"
#include "quant/dequantize.h"
#include "test_util.h"

namespace densa {
namespace {

using namespace ::densa::testing;  // NOLINT

const char* kDense = "tinystories-llama-1m";
const char* kMoe = "tinystories-mixtral-3.6m";

std::filesystem::path gguf_path(const std::string& model, const std::string& type) {
  return model_dir(model) / "gguf" / (model + "-" + type + ".gguf");
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<float> dequantize(const WeightView& w) {
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, out.data() + r * w.cols);
  return out;
}

// Rounds every value through a narrower format (identity for F32 comparisons).
using Rounding = std::function<float(float)>;
float no_rounding(float x) { return x; }
float f16_rounding(float x) { return f16_to_f32(f32_to_f16(x)); }
float bf16_rounding(float x) { return bf16_to_f32(f32_to_bf16(x)); }

void expect_same_matrix(const WeightView& a, const WeightView& ref, const Rounding& round, const std::string& what) {
  ASSERT_EQ(a.rows, ref.rows) << what;
  ASSERT_EQ(a.cols, ref.cols) << what;
  std::vector<float> x = dequantize(a), y = dequantize(ref);
  for (float& v : y) v = round(v);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << what << " differs";
}

void expect_same_vector(const std::vector<float>& a, std::vector<float> ref, const Rounding& round,
                        const std::string& what) {
  ASSERT_EQ(a.size(), ref.size()) << what;
  for (float& v : ref) v = round(v);
  EXPECT_EQ(std::memcmp(a.data(), ref.data(), a.size() * sizeof(float)), 0) << what << " differs";
}

// Every tensor of `a` equals the (rounded) tensor of `ref`; norms stay F32 in every fixture.
void expect_same_weights(const ModelWeights& a, const ModelWeights& ref, const Rounding& round) {
  expect_same_matrix(a.tok_embeddings, ref.tok_embeddings, round, "tok_embeddings");
  expect_same_matrix(a.lm_head, ref.lm_head, round, "lm_head");
  const bool norms_rounded = a.format == "hf";  // HF BF16 rounds norms too; GGUF F16 keeps them F32
  const Rounding norm_round = norms_rounded ? round : Rounding(no_rounding);
  expect_same_vector(a.final_norm, ref.final_norm, norm_round, "final_norm");
  ASSERT_EQ(a.layers.size(), ref.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights& l = a.layers[i];
    const LayerWeights& r = ref.layers[i];
    const std::string p = "layer " + std::to_string(i) + " ";
    expect_same_vector(l.attn_norm, r.attn_norm, norm_round, p + "attn_norm");
    expect_same_vector(l.ffn_norm, r.ffn_norm, norm_round, p + "ffn_norm");
    expect_same_matrix(l.wq, r.wq, round, p + "wq");
    expect_same_matrix(l.wk, r.wk, round, p + "wk");
    expect_same_matrix(l.wv, r.wv, round, p + "wv");
    expect_same_matrix(l.wo, r.wo, round, p + "wo");
    if (!a.config.is_moe()) {
      expect_same_matrix(l.w_gate, r.w_gate, round, p + "w_gate");
      expect_same_matrix(l.w_up, r.w_up, round, p + "w_up");
      expect_same_matrix(l.w_down, r.w_down, round, p + "w_down");
      continue;
    }
    expect_same_matrix(l.router, r.router, a.format == "gguf" ? Rounding(no_rounding) : round, p + "router");
    ASSERT_EQ(l.expert_gate.size(), r.expert_gate.size());
    for (size_t e = 0; e < l.expert_gate.size(); ++e) {
      const std::string pe = p + "expert " + std::to_string(e) + " ";
      expect_same_matrix(l.expert_gate[e], r.expert_gate[e], round, pe + "gate");
      expect_same_matrix(l.expert_up[e], r.expert_up[e], round, pe + "up");
      expect_same_matrix(l.expert_down[e], r.expert_down[e], round, pe + "down");
    }
  }
}

ModelWeights load_ok(const std::filesystem::path& p) {
  auto w = load_model(p);
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  return std::move(w).value();
}

// ---- every fixture loads with the right config and shapes ----

class ModelLoaderFixtureTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(ModelLoaderFixtureTest, LoadsWithConfigAndShapes) {
  const auto& [model, variant] = GetParam();
  const bool is_gguf = variant == "f32" || variant == "f16";
  const auto path = is_gguf ? gguf_path(model, variant) : model_dir(model) / variant;
  auto w = load_model(path);
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  const ModelConfig& c = w->config;
  const bool moe = model == kMoe;
  EXPECT_EQ(w->format, is_gguf ? "gguf" : "hf");
  EXPECT_EQ(c.architecture, moe ? "MixtralForCausalLM" : "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, 1024);
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, moe ? 256 : 384);
  EXPECT_EQ(c.num_experts, moe ? 8 : 0);
  EXPECT_EQ(c.num_experts_per_tok, moe ? 2 : 0);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);

  const DType matrix_dtype = variant == "f16" ? DType::kF16 : variant == "hf-bf16" ? DType::kBF16 : DType::kF32;
  EXPECT_EQ(w->tok_embeddings.dtype, matrix_dtype);
  EXPECT_EQ(w->tok_embeddings.rows, 1024);
  EXPECT_EQ(w->tok_embeddings.cols, 128);
  EXPECT_EQ(w->lm_head.rows, 1024);
  EXPECT_NE(w->lm_head.data, w->tok_embeddings.data);
  EXPECT_EQ(w->final_norm.size(), 128u);
  ASSERT_EQ(w->layers.size(), 4u);
  for (const LayerWeights& l : w->layers) {
    EXPECT_EQ(l.attn_norm.size(), 128u);
    EXPECT_EQ(l.ffn_norm.size(), 128u);
    EXPECT_EQ(l.wq.rows, 128);
    EXPECT_EQ(l.wq.cols, 128);
    EXPECT_EQ(l.wk.rows, 64);
    EXPECT_EQ(l.wv.rows, 64);
    EXPECT_EQ(l.wo.rows, 128);
    EXPECT_EQ(l.wo.cols, 128);
    EXPECT_EQ(l.wv.dtype, matrix_dtype);
    if (moe) {
      EXPECT_TRUE(l.w_gate.empty());
      EXPECT_EQ(l.router.rows, 8);
      EXPECT_EQ(l.router.cols, 128);
      ASSERT_EQ(l.expert_gate.size(), 8u);
      ASSERT_EQ(l.expert_up.size(), 8u);
      ASSERT_EQ(l.expert_down.size(), 8u);
      EXPECT_EQ(l.expert_gate[7].rows, 256);
      EXPECT_EQ(l.expert_up[7].cols, 128);
      EXPECT_EQ(l.expert_down[7].rows, 128);
      EXPECT_EQ(l.expert_down[7].cols, 256);
    } else {
      EXPECT_TRUE(l.router.empty());
      EXPECT_TRUE(l.expert_gate.empty());
      EXPECT_EQ(l.w_gate.rows, 384);
      EXPECT_EQ(l.w_up.cols, 128);
      EXPECT_EQ(l.w_down.rows, 128);
      EXPECT_EQ(l.w_down.cols, 384);
    }
  }
  EXPECT_EQ(w->num_params(), moe ? 3609728 : 1049728);
  const int64_t matrix_elem_bytes = matrix_dtype == DType::kF32 ? 4 : 2;
  const int64_t norm_params = 128 * 9;
  const int64_t router_params = moe ? 4 * 8 * 128 : 0;
  const int64_t router_bytes = router_params * (variant == "f16" ? 4 : matrix_elem_bytes);
  EXPECT_EQ(w->weight_bytes(),
            (w->num_params() - norm_params - router_params) * matrix_elem_bytes + norm_params * 4 + router_bytes);
  ASSERT_NE(w->tokenizer, nullptr);
  EXPECT_EQ(w->tokenizer->vocab_size(), 1024);
  EXPECT_EQ(w->tokenizer->bos_id(), 1);
  EXPECT_EQ(w->tokenizer->eos_id(), 2);
}

INSTANTIATE_TEST_SUITE_P(ModelLoaderAllFixtures, ModelLoaderFixtureTest,
                         ::testing::Values(std::pair<std::string, std::string>{kDense, "hf"},
                                           std::pair<std::string, std::string>{kDense, "hf-bf16"},
                                           std::pair<std::string, std::string>{kDense, "f32"},
                                           std::pair<std::string, std::string>{kDense, "f16"},
                                           std::pair<std::string, std::string>{kMoe, "hf"},
                                           std::pair<std::string, std::string>{kMoe, "hf-bf16"},
                                           std::pair<std::string, std::string>{kMoe, "f32"},
                                           std::pair<std::string, std::string>{kMoe, "f16"}),
                         [](const auto& info) {
                           std::string s = (info.param.first == kDense ? "dense_" : "moe_") + info.param.second;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// ---- GGUF and HF give the same ModelWeights ----

TEST(ModelLoaderTest, GgufF32EqualsHfF32BitExact) {
  for (const char* model : {kDense, kMoe}) {
    SCOPED_TRACE(model);
    const ModelWeights hf = load_ok(model_dir(model) / "hf");
    const ModelWeights gguf = load_ok(gguf_path(model, "f32"));
    expect_same_weights(gguf, hf, no_rounding);
  }
}

TEST(ModelLoaderTest, GgufF16EqualsHfRoundedToF16) {
  for (const char* model : {kDense, kMoe}) {
    SCOPED_TRACE(model);
    const ModelWeights hf = load_ok(model_dir(model) / "hf");
    const ModelWeights gguf = load_ok(gguf_path(model, "f16"));
    expect_same_weights(gguf, hf, f16_rounding);
  }
}

TEST(ModelLoaderTest, HfBf16EqualsHfRoundedToBf16) {
  for (const char* model : {kDense, kMoe}) {
    SCOPED_TRACE(model);
    const ModelWeights hf = load_ok(model_dir(model) / "hf");
    const ModelWeights bf16 = load_ok(model_dir(model) / "hf-bf16");
    expect_same_weights(bf16, hf, bf16_rounding);
  }
}

TEST(ModelLoaderTest, GgufQkRowsAreUnpermutedPerHead) {
  const ModelWeights w = load_ok(gguf_path(kDense, "f32"));
  auto f = GgufFile::open(gguf_path(kDense, "f32"));
  ASSERT_TRUE(f.is_ok());
  auto raw_k = f->tensor("blk.1.attn_k.weight");
  ASSERT_TRUE(raw_k.is_ok());
  const int64_t row_bytes = 128 * 4;
  for (int head = 0; head < 4; ++head) {
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 8; ++i) {
        const uint8_t* gguf_row = raw_k->data + (head * 16 + 2 * i + h) * row_bytes;
        EXPECT_EQ(std::memcmp(w.layers[1].wk.row_ptr(head * 16 + h * 8 + i), gguf_row, row_bytes), 0);
      }
    }
  }
  // V is not permuted and stays in the mapping.
  auto raw_v = f->tensor("blk.1.attn_v.weight");
  ASSERT_TRUE(raw_v.is_ok());
  EXPECT_EQ(std::memcmp(w.layers[1].wv.data, raw_v->data, raw_v->nbytes), 0);
}

TEST(ModelLoaderTest, GgufExpertsAreViewsIntoTheStackedTensor) {
  auto loaded = load_model(gguf_path(kMoe, "f16"), LoadOptions{.prepare_for_kernels = false});  // as stored
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const ModelWeights& w = loaded.value();
  const LayerWeights& l = w.layers[2];
  const auto* base = static_cast<const uint8_t*>(l.expert_up[0].data);
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(static_cast<const uint8_t*>(l.expert_up[e].data), base + e * 256 * 128 * 2);
  }
  ASSERT_EQ(w.files.size(), 1u);
  const uint8_t* file_begin = w.files[0]->data();
  EXPECT_GE(base, file_begin);
  EXPECT_LT(base, file_begin + w.files[0]->size());
}

// ---- malformed inputs: one clean error each ----

// Copies the fixture GGUF into a writer, lets `edit` change it, writes it, loads it.
Result<ModelWeights> load_edited_gguf(const std::string& test, const std::string& model,
                                      const std::function<void(GgufWriter&)>& edit) {
  auto f = GgufFile::open(gguf_path(model, "f32"));
  if (!f.is_ok()) return f.status();
  GgufWriter w = gguf_writer_from(*f);
  edit(w);
  const auto dir = fresh_temp_dir(test);
  write_file(dir / "m.gguf", w.serialize());
  return load_model(dir / "m.gguf");
}

// Copies an HF fixture dir (config.json + model.safetensors) and lets the callers edit it.
std::filesystem::path copy_hf_dir(const std::string& test, const std::string& model) {
  const auto dir = fresh_temp_dir(test);
  for (const char* name : {"config.json", "model.safetensors"}) {
    std::filesystem::copy_file(model_dir(model) / "hf" / name, dir / name);
  }
  return dir;
}

TEST(ModelLoaderTest, TruncatedGgufIsDataLoss) {
  const std::string bytes = read_text(gguf_path(kDense, "f16"));
  const auto dir = fresh_temp_dir("loader_trunc");
  write_file(dir / "m.gguf", bytes.substr(0, bytes.size() / 2));
  auto w = load_model(dir / "m.gguf");
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(w.status().message(), "out of bounds")) << w.status().message();
}

TEST(ModelLoaderTest, MissingGgufTensorIsNotFoundNamingIt) {
  auto w = load_edited_gguf("missing_gguf", kDense, [](GgufWriter& g) { g.erase_tensor("blk.2.attn_v.weight"); });
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(w.status().message(), "missing tensor 'blk.2.attn_v.weight'")) << w.status().message();
}

TEST(ModelLoaderTest, MissingHfTensorIsNotFoundNamingIt) {
  const auto dir = copy_hf_dir("missing_hf", kDense);
  auto f = SafetensorsFile::open(model_dir(kDense) / "hf" / "model.safetensors");
  ASSERT_TRUE(f.is_ok());
  auto ts = safetensors_tensors_from(*f);
  std::erase_if(ts, [](const StWriterTensor& t) { return t.name == "model.layers.3.mlp.down_proj.weight"; });
  write_file(dir / "model.safetensors", serialize_safetensors(ts));
  auto w = load_model(dir);
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(w.status().message(), "model.layers.3.mlp.down_proj.weight")) << w.status().message();
}

TEST(ModelLoaderTest, HfShapeDisagreeingWithConfigNamesTensorAndShapes) {
  const auto dir = copy_hf_dir("shape_hf", kDense);
  std::string cfg = read_text(dir / "config.json");
  cfg.replace(cfg.find("\"intermediate_size\": 384"), 24, "\"intermediate_size\": 512");
  write_file(dir / "config.json", cfg);
  auto w = load_model(dir);
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.status().message(), dir.string() + ": tensor 'model.layers.0.mlp.gate_proj.weight' has shape "
                                                 "[384, 128] but the config expects [512, 128]");
}

TEST(ModelLoaderTest, GgufShapeDisagreeingWithMetadataNamesTensorAndShapes) {
  auto w = load_edited_gguf("shape_gguf", kDense,
                            [](GgufWriter& g) { g.set("llama.attention.head_count_kv", gguf_u32(2)); });
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(w.status().message(),
                       "tensor 'blk.0.attn_k.weight' has shape ne=[128, 64] but the config expects ne=[128, 32]"))
      << w.status().message();
}

TEST(ModelLoaderTest, UnsupportedGgufTensorTypeIsUnimplemented) {
  auto w = load_edited_gguf("dtype_gguf", kDense, [](GgufWriter& g) {
    GgufWriterTensor* t = g.tensor("blk.0.attn_q.weight");
    t->ggml_type = 35;                                // tq2_0 (ternary): not supported
    t->bytes = std::string(128 * 128 / 256 * 66, '\0');
  });
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(w.status().message(), "blk.0.attn_q.weight")) << w.status().message();
  EXPECT_TRUE(contains(w.status().message(), "tq2_0")) << w.status().message();
}

TEST(ModelLoaderTest, UnsupportedHfMatrixDtypeIsUnimplemented) {
  const auto dir = copy_hf_dir("dtype_hf", kDense);
  auto f = SafetensorsFile::open(model_dir(kDense) / "hf" / "model.safetensors");
  ASSERT_TRUE(f.is_ok());
  auto ts = safetensors_tensors_from(*f);
  for (auto& t : ts) {
    if (t.name == "model.layers.1.self_attn.o_proj.weight") {
      t.dtype = "I8";
      t.bytes.resize(128 * 128);
    }
  }
  write_file(dir / "model.safetensors", serialize_safetensors(ts));
  auto w = load_model(dir);
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(w.status().message(), "model.layers.1.self_attn.o_proj.weight")) << w.status().message();
  EXPECT_TRUE(contains(w.status().message(), "i8")) << w.status().message();
}

TEST(ModelLoaderTest, UnknownGgufArchitectureIsUnimplemented) {
  auto w = load_edited_gguf("arch_gguf", kDense, [](GgufWriter& g) { g.set("general.architecture", gguf_str("qwen2")); });
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(w.status().message(), "unsupported GGUF architecture 'qwen2'")) << w.status().message();
}

TEST(ModelLoaderTest, UnknownHfArchitectureIsUnimplemented) {
  const auto dir = copy_hf_dir("arch_hf", kMoe);
  std::string cfg = read_text(dir / "config.json");
  cfg.replace(cfg.find("MixtralForCausalLM"), 18, "GptOssForCausalLM");
  write_file(dir / "config.json", cfg);
  auto w = load_model(dir);
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(w.status().message(), (dir / "config.json").string())) << w.status().message();
  EXPECT_TRUE(contains(w.status().message(), "GptOssForCausalLM")) << w.status().message();
}

TEST(ModelLoaderTest, MalformedConfigJsonIsInvalidArgument) {
  const auto dir = copy_hf_dir("badcfg_hf", kDense);
  const std::string cfg = read_text(dir / "config.json");
  write_file(dir / "config.json", cfg.substr(0, cfg.size() / 2));
  auto w = load_model(dir);
  ASSERT_FALSE(w.is_ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(w.status().message(), "config.json: malformed JSON")) << w.status().message();
}

TEST(ModelLoaderTest, GgufWithoutOutputTiesLmHeadToEmbeddings) {
  auto w = load_edited_gguf("tied_gguf", kDense, [](GgufWriter& g) { g.erase_tensor("output.weight"); });
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_TRUE(w->config.tie_word_embeddings);
  EXPECT_EQ(w->lm_head.data, w->tok_embeddings.data);
  EXPECT_EQ(w->num_params(), 1049728 - 1024 * 128);
}

TEST(ModelLoaderTest, ShardedHfDirEqualsSingleFile) {
  const auto dir = fresh_temp_dir("sharded_hf");
  std::filesystem::copy_file(model_dir(kMoe) / "hf" / "config.json", dir / "config.json");
  auto f = SafetensorsFile::open(model_dir(kMoe) / "hf" / "model.safetensors");
  ASSERT_TRUE(f.is_ok());
  const auto ts = safetensors_tensors_from(*f);
  std::vector<StWriterTensor> shard[2];
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::string shard_name = "model-0000" + std::to_string(i % 2 + 1) + "-of-00002.safetensors";
    shard[i % 2].push_back(ts[i]);
    weight_map[ts[i].name] = shard_name;
  }
  write_file(dir / "model-00001-of-00002.safetensors", serialize_safetensors(shard[0]));
  write_file(dir / "model-00002-of-00002.safetensors", serialize_safetensors(shard[1]));
  write_file(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump());
  const ModelWeights sharded = load_ok(dir);
  EXPECT_EQ(sharded.files.size(), 2u);
  EXPECT_EQ(sharded.tokenizer, nullptr);  // no tokenizer.model in this dir
  expect_same_weights(sharded, load_ok(model_dir(kMoe) / "hf"), no_rounding);
}

}  // namespace
}  // namespace densa
