// `densa quantize` and the loader's quantized paths on the real fixtures:
//  * a checkpoint written by quantize_checkpoint (HF FP8, HF INT4 g32/g128, GGUF Q8_0/Q4_0)
//    loads back with logits bit-identical to quantize-on-load of the source;
//  * the written files have the documented layout (tensor names, dtypes, shapes, config,
//    GGUF alignment and block sizes);
//  * quantized weights stay accurate (perplexity of two windows close to BF16).
#include "tools/model_files/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "io/gguf_file.h"
#include "io/safetensors.h"
#include "io/test_file_writers.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "quality/perplexity.h"
#include "test_util.h"

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

// --lm-head-dtype: lm_head written in the checkpoint's own quantized format (or BF16) loads
// back as it, with logits bit-identical to quantize-on-load with the same lm_head target.
void hf_head_round_trip(const fs::path& in, const std::string& to, int group, const std::string& head,
                        const WeightQuantSpec& head_spec, DType body) {
  const fs::path out = temp_dir(in.parent_path().filename().string() + in.filename().string() + "_" + to + "_head_" + head);
  auto r = quantize_checkpoint({in, out, to, group, head});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto loaded = load_model(out);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_FALSE(loaded->config.tie_word_embeddings);
  EXPECT_EQ(loaded->layers[0].wq.dtype, body);
  EXPECT_EQ(loaded->lm_head.dtype, head_spec.dtype);
  EXPECT_TRUE(weight_view_in_format(loaded->lm_head, head_spec));
  EXPECT_EQ(loaded->tok_embeddings.dtype, load_model(in)->tok_embeddings.dtype);  // kept as stored
  expect_bit_identical(logits_of(out, {}), logits_of(in, LoadOptions{body, group, head_spec}));
  auto st = SafetensorsDir::open(out);
  ASSERT_TRUE(st.is_ok());
  const auto q = testing::read_json(out / "config.json")["quantization_config"];
  // (const operator[] on a missing key is undefined: FP8 block configs carry no "ignore")
  const bool ignored =
      q.contains("ignore") && std::find(q["ignore"].begin(), q["ignore"].end(), "lm_head") != q["ignore"].end();
  switch (head_spec.dtype) {
    case DType::kI4:
      EXPECT_TRUE(st->has_tensor("lm_head.weight_packed"));
      EXPECT_FALSE(st->has_tensor("lm_head.weight"));
      EXPECT_FALSE(ignored) << q.dump();
      break;
    case DType::kFP8E4M3:
      EXPECT_EQ(st->tensor("lm_head.weight")->dtype_name, "F8_E4M3");
      EXPECT_TRUE(st->has_tensor("lm_head.weight_scale_inv"));
      break;
    default:
      EXPECT_EQ(st->tensor("lm_head.weight")->dtype_name, "BF16");
      if (q.contains("ignore")) {
        EXPECT_TRUE(ignored) << q.dump();
      }
      break;
  }
  fs::remove_all(out);
}

TEST(QuantLoad, HfInt4WithInt4HeadRoundTripDense) {
  hf_head_round_trip(testing::model_dir(kDense) / "hf", "int4", 32, "int4", {DType::kI4, 32}, DType::kI4);
}
TEST(QuantLoad, HfInt4WithInt4HeadRoundTripMoe) {
  hf_head_round_trip(testing::model_dir(kMoe) / "hf", "int4", 128, "int4", {DType::kI4, 128}, DType::kI4);
}
TEST(QuantLoad, HfFp8WithFp8HeadRoundTrip) {
  hf_head_round_trip(testing::model_dir(kMoe) / "hf", "fp8", 128, "fp8", {DType::kFP8E4M3}, DType::kFP8E4M3);
}
TEST(QuantLoad, HfInt4WithBf16HeadRoundTrip) {
  hf_head_round_trip(testing::model_dir(kDense) / "hf", "int4", 32, "bf16", {DType::kBF16}, DType::kI4);
}

// A tied HF model (tie_word_embeddings, no lm_head tensor): the quantized head becomes its own
// tensor, the config unties, and the embeddings are copied as stored.
TEST(QuantLoad, HfTiedHeadIsWrittenUntiedAndEmbeddingsKept) {
  const fs::path tied = temp_dir("tied_in");
  fs::create_directories(tied);
  auto src = SafetensorsFile::open(testing::model_dir(kDense) / "hf" / "model.safetensors");
  ASSERT_TRUE(src.is_ok());
  std::vector<testing::StWriterTensor> ts;
  for (auto& t : testing::safetensors_tensors_from(*src)) {
    if (t.name != "lm_head.weight") ts.push_back(t);
  }
  testing::write_file(tied / "model.safetensors", testing::serialize_safetensors(ts));
  auto cfg = testing::read_json(testing::model_dir(kDense) / "hf" / "config.json");
  cfg["tie_word_embeddings"] = true;
  testing::write_file(tied / "config.json", cfg.dump());
  {
    auto w = load_model(tied);
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    ASSERT_TRUE(w->config.tie_word_embeddings);
    ASSERT_EQ(w->lm_head.data, w->tok_embeddings.data);
  }

  const WeightQuantSpec head{DType::kI4, 32};
  hf_head_round_trip(tied, "int4", 32, "int4-g32", head, DType::kI4);
  const fs::path out = temp_dir("tied_out");
  ASSERT_TRUE(quantize_checkpoint({tied, out, "int4", 32, "int4"}).is_ok());
  EXPECT_EQ(testing::read_json(out / "config.json")["tie_word_embeddings"], false);
  auto a = SafetensorsDir::open(out);
  auto b = SafetensorsDir::open(tied);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto ea = a->tensor("model.embed_tokens.weight");
  auto eb = b->tensor("model.embed_tokens.weight");
  ASSERT_TRUE(ea.is_ok() && eb.is_ok());
  ASSERT_EQ(ea->nbytes, eb->nbytes);
  EXPECT_EQ(std::memcmp(ea->data, eb->data, ea->nbytes), 0);
  fs::remove_all(out);
  fs::remove_all(tied);
}

// GGUF -> GGUF: output.weight in its own GGUF type; a tied file gains an output.weight.
TEST(QuantLoad, GgufQ4_0WithQ8_0OutputRoundTrip) {
  const fs::path in = testing::model_dir(kDense) / "gguf" / "tinystories-llama-1m-f32.gguf";
  const fs::path out = temp_dir("gguf_head") / "out.gguf";
  auto r = quantize_checkpoint({in, out, "q4_0", 128, "q8_0"});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->tensor("output.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(f->tensor("token_embd.weight")->dtype, DType::kF32);
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight")->dtype, DType::kQ4_0);
  const WeightQuantSpec head{DType::kQ8_0};
  expect_bit_identical(logits_of(out, {}), logits_of(in, LoadOptions{DType::kQ4_0, 128, head}));

  // Tied: no output.weight in the input.
  auto src = GgufFile::open(in);
  ASSERT_TRUE(src.is_ok());
  testing::GgufWriter g = testing::gguf_writer_from(*src);
  g.erase_tensor("output.weight");
  const fs::path tied = out.parent_path() / "tied.gguf", tied_out = out.parent_path() / "tied-out.gguf";
  testing::write_file(tied, g.serialize());
  ASSERT_TRUE(quantize_checkpoint({tied, tied_out, "q4_0", 128, "q8_0"}).is_ok());
  auto t = GgufFile::open(tied_out);
  ASSERT_TRUE(t.is_ok());
  auto added = t->tensor("output.weight");
  ASSERT_TRUE(added.is_ok());
  EXPECT_EQ(added->dtype, DType::kQ8_0);
  EXPECT_EQ(added->ne, (std::vector<int64_t>{128, 1024}));
  auto loaded = load_model(tied_out);
  ASSERT_TRUE(loaded.is_ok());
  EXPECT_FALSE(loaded->config.tie_word_embeddings);
  EXPECT_EQ(loaded->tok_embeddings.dtype, DType::kF32);
  expect_bit_identical(logits_of(tied_out, {}), logits_of(tied, LoadOptions{DType::kQ4_0, 128, head}));
  fs::remove_all(out.parent_path());
}

TEST(QuantLoad, LmHeadDtypeTheOutputCannotHoldIsAnError) {
  const fs::path out = temp_dir("bad_head");
  struct Case { fs::path in; const char* to; const char* head; const char* message; };
  const fs::path hf = testing::model_dir(kDense) / "hf";
  const fs::path gguf = testing::model_dir(kDense) / "gguf" / "tinystories-llama-1m-f16.gguf";
  for (const Case& c : {Case{hf, "fp8", "int4", "--lm-head-dtype int4-g32: a Hugging Face checkpoint written --to fp8 "
                                                "holds lm_head as bf16 or as fp8"},
                        Case{hf, "int4", "int4-g128", "holds lm_head as bf16 or as int4-g32"},
                        Case{hf, "bf16", "fp8", "--lm-head-dtype fp8: a Hugging Face checkpoint written --to bf16 "
                                                "has no quantization_config, so lm_head is bf16"},
                        Case{gguf, "q4_0", "int4", "a GGUF output holds lm_head as bf16, q8_0 or q4_0"},
                        Case{hf, "int4", "int3", "--lm-head-dtype must be bf16, fp8, int4"}}) {
    auto r = quantize_checkpoint({c.in, out, c.to, 32, c.head});
    ASSERT_FALSE(r.is_ok()) << c.to << " " << c.head;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(fs::exists(out));
}

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
