// `densa quantize` and the loader's quantized paths on the real fixtures:
//  * a checkpoint written by quantize_checkpoint (HF FP8, HF INT4 g32/g128, GGUF Q8_0/Q4_0)
//    loads back with logits bit-identical to quantize-on-load of the source;
//  * the written files have the documented layout (tensor names, dtypes, shapes, config,
//    GGUF alignment and block sizes);
//  * quantized weights stay accurate (perplexity of two windows close to BF16).
#include "tools/quantize.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "io/gguf_file.h"
#include "io/safetensors.h"
#include "model/model_loader.h"
#include "test_util.h"
#include "tools/generator.h"
#include "tools/perplexity.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

const char kDense[] = "tinystories-llama-1m";
const char kMoe[] = "tinystories-mixtral-3.6m";

fs::path temp_dir(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() / ("densa_quant_" + std::to_string(getpid()) + "_" + tag);
  fs::remove_all(p);
  return p;
}

std::vector<TokenId> prompt() {
  const auto ids = testing::validation_ids(kDense);
  std::vector<TokenId> p(ids.begin(), ids.begin() + 48);
  p[0] = 1;
  return p;
}

std::vector<float> logits_of(const fs::path& path, const LoadOptions& opts) {
  auto w = load_model(path, opts);
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  if (!w.is_ok()) return {};
  ThreadPool pool(2);
  return prompt_logits(w.value(), prompt(), DType::kF32, &pool);
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  size_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += std::memcmp(&a[i], &b[i], 4) != 0;
  EXPECT_EQ(diff, 0u) << "of " << a.size() << " logits";
}

// Quantizes `model`'s HF dir to `to`, loads it, compares with quantize-on-load.
void hf_round_trip(const char* model, const std::string& to, DType dtype, int group) {
  const fs::path in = testing::model_dir(model) / "hf";
  const fs::path out = temp_dir(std::string(model) + "_" + to + std::to_string(group));
  int last_done = 0, last_total = 0;
  auto r = quantize_checkpoint({in, out, to, group}, [&](int d, int t) { last_done = d; last_total = t; });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_GT(r->num_quantized, 0);
  EXPECT_EQ(last_done, last_total);
  EXPECT_TRUE(fs::exists(out / "tokenizer.model"));
  expect_bit_identical(logits_of(out, {}), logits_of(in, LoadOptions{dtype, group}));
  fs::remove_all(out);
}

TEST(QuantLoad, HfFp8CheckpointRoundTripDense) { hf_round_trip(kDense, "fp8", DType::kFP8E4M3, 128); }
TEST(QuantLoad, HfFp8CheckpointRoundTripMoe) { hf_round_trip(kMoe, "fp8", DType::kFP8E4M3, 128); }
TEST(QuantLoad, HfInt4G32CheckpointRoundTripDense) { hf_round_trip(kDense, "int4", DType::kI4, 32); }
TEST(QuantLoad, HfInt4G32CheckpointRoundTripMoe) { hf_round_trip(kMoe, "int4", DType::kI4, 32); }
TEST(QuantLoad, HfInt4G128CheckpointRoundTripDense) { hf_round_trip(kDense, "int4", DType::kI4, 128); }

TEST(QuantLoad, Fp8CheckpointLayout) {
  const fs::path out = temp_dir("fp8_layout");
  ASSERT_TRUE(quantize_checkpoint({testing::model_dir(kMoe) / "hf", out, "fp8", 128}).is_ok());
  const auto config = testing::read_json(out / "config.json");
  EXPECT_EQ(config["quantization_config"]["quant_method"], "fp8");
  EXPECT_EQ(config["quantization_config"]["weight_block_size"], nlohmann::json({128, 128}));
  auto st = SafetensorsDir::open(out);
  ASSERT_TRUE(st.is_ok());
  auto w = st->tensor("model.layers.1.block_sparse_moe.experts.3.w2.weight");  // [128, 256]
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->dtype_name, "F8_E4M3");
  EXPECT_EQ(w->shape, (std::vector<int64_t>{128, 256}));
  auto s = st->tensor("model.layers.1.block_sparse_moe.experts.3.w2.weight_scale_inv");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->dtype_name, "F32");
  EXPECT_EQ(s->shape, (std::vector<int64_t>{1, 2}));
  auto k = st->tensor("model.layers.0.self_attn.k_proj.weight_scale_inv");  // [64, 128] -> one partial block
  ASSERT_TRUE(k.is_ok());
  EXPECT_EQ(k->shape, (std::vector<int64_t>{1, 1}));
  for (const char* kept : {"model.embed_tokens.weight", "lm_head.weight", "model.layers.2.block_sparse_moe.gate.weight",
                           "model.norm.weight"}) {
    auto t = st->tensor(kept);
    ASSERT_TRUE(t.is_ok()) << kept;
    EXPECT_EQ(t->dtype_name, "F32") << kept;
  }
  fs::remove_all(out);
}

TEST(QuantLoad, Int4CheckpointLayout) {
  const fs::path out = temp_dir("int4_layout");
  ASSERT_TRUE(quantize_checkpoint({testing::model_dir(kDense) / "hf", out, "int4", 32}).is_ok());
  const auto q = testing::read_json(out / "config.json")["quantization_config"];
  EXPECT_EQ(q["quant_method"], "compressed-tensors");
  EXPECT_EQ(q["format"], "pack-quantized");
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["group_size"], 32);
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["num_bits"], 4);
  auto st = SafetensorsDir::open(out);
  ASSERT_TRUE(st.is_ok());
  const std::string base = "model.layers.0.mlp.down_proj.";  // [128, 384]
  EXPECT_FALSE(st->has_tensor(base + "weight"));
  auto p = st->tensor(base + "weight_packed");
  auto s = st->tensor(base + "weight_scale");
  auto sh = st->tensor(base + "weight_shape");
  ASSERT_TRUE(p.is_ok() && s.is_ok() && sh.is_ok());
  EXPECT_EQ(p->dtype_name, "I32");
  EXPECT_EQ(p->shape, (std::vector<int64_t>{128, 48}));
  EXPECT_EQ(s->dtype_name, "BF16");
  EXPECT_EQ(s->shape, (std::vector<int64_t>{128, 12}));
  int32_t dims[2];
  std::memcpy(dims, sh->data, 8);
  EXPECT_EQ(dims[0], 128);
  EXPECT_EQ(dims[1], 384);
  fs::remove_all(out);
}

// GGUF -> GGUF Q8_0 / Q4_0: header and blocks valid, and loading gives the same logits as
// quantize-on-load of the source GGUF.
void gguf_round_trip(const std::string& to, DType dtype, uint32_t ggml_type, int64_t block_bytes) {
  const fs::path in = testing::model_dir(kMoe) / "gguf" / "tinystories-mixtral-3.6m-f32.gguf";
  const fs::path out = temp_dir("gguf") / ("out-" + to + ".gguf");
  auto r = quantize_checkpoint({in, out, to, 128});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto src = GgufFile::open(in);
  auto f = GgufFile::open(out);
  ASSERT_TRUE(src.is_ok() && f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->data_offset() % f->alignment(), 0u);
  EXPECT_EQ(f->get_int("general.file_type"), dtype == DType::kQ8_0 ? 7 : 2);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens"), src->get_string_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(f->get_int("llama.expert_count"), 8);
  ASSERT_EQ(f->tensor_infos().size(), src->tensor_infos().size());
  int quantized = 0;
  for (size_t i = 0; i < f->tensor_infos().size(); ++i) {
    const GgufTensorInfo& t = f->tensor_infos()[i];
    EXPECT_EQ(t.name, src->tensor_infos()[i].name);  // order kept
    EXPECT_EQ(t.ne, src->tensor_infos()[i].ne);
    EXPECT_EQ(t.offset % f->alignment(), 0u);
    const bool matrix = t.name.find("attn_q") != std::string::npos || t.name.find("ffn_down_exps") != std::string::npos;
    if (matrix) {
      EXPECT_EQ(t.ggml_type, ggml_type) << t.name;
      auto data = f->tensor(t.name);
      ASSERT_TRUE(data.is_ok());
      EXPECT_EQ(static_cast<int64_t>(data->nbytes), data->numel() / 32 * block_bytes);
      ++quantized;
    }
    if (t.name == "token_embd.weight" || t.name == "output.weight") {
      EXPECT_EQ(t.ggml_type, 0u) << t.name;
    }
  }
  EXPECT_EQ(quantized, 8);
  expect_bit_identical(logits_of(out, {}), logits_of(in, LoadOptions{dtype, 128}));
  fs::remove_all(out.parent_path());
}

TEST(QuantLoad, GgufQ8_0RoundTrip) { gguf_round_trip("q8_0", DType::kQ8_0, 8, 34); }
TEST(QuantLoad, GgufQ4_0RoundTrip) { gguf_round_trip("q4_0", DType::kQ4_0, 2, 18); }

TEST(QuantLoad, RejectsMismatchedFormats) {
  const fs::path out = temp_dir("bad");
  auto a = quantize_checkpoint({testing::model_dir(kDense) / "hf", out, "q4_0", 128});
  EXPECT_FALSE(a.is_ok());
  auto b = quantize_checkpoint({testing::model_dir(kDense) / "hf", out, "int4", 64});
  EXPECT_FALSE(b.is_ok());
  auto c = quantize_checkpoint({testing::model_dir(kDense) / "hf", out, "int3", 128});
  EXPECT_FALSE(c.is_ok());
  EXPECT_FALSE(load_model(testing::model_dir(kDense) / "hf", LoadOptions{DType::kF16, 128}).is_ok());
  fs::remove_all(out);
}

// Accuracy sanity on two perplexity windows: each format within a few percent of BF16.
TEST(QuantLoad, QuantizedPerplexityCloseToBf16) {
  const fs::path in = testing::model_dir(kMoe) / "hf";
  const auto ids = testing::validation_ids(kMoe);
  ThreadPool pool(2);
  PerplexityOptions po;
  po.max_windows = 2;
  auto ppl = [&](DType t, int g) {
    auto w = load_model(in, LoadOptions{t, g});
    EXPECT_TRUE(w.is_ok());
    return compute_perplexity(w.value(), ids, po, &pool).ppl_all;
  };
  const double bf16 = ppl(DType::kBF16, 128);
  EXPECT_NEAR(ppl(DType::kFP8E4M3, 128), bf16, 0.02 * bf16);
  EXPECT_NEAR(ppl(DType::kI4, 32), bf16, 0.06 * bf16);
  EXPECT_NEAR(ppl(DType::kQ8_0, 128), bf16, 0.01 * bf16);
}

}  // namespace
}  // namespace densa
