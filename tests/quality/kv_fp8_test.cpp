// FP8 e4m3 KV cache end to end on both fixtures (HF F32 weights): calibration equals the
// golden K/V maxima, perplexity within 1% of a BF16 cache for static and dynamic scales,
// paged caches give the same logits as contiguous ones, and the golden greedy continuations
// hold with a BF16 cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "io/safetensors.h"
#include "io/test_file_writers.h"
#include "kv/contiguous_kv_cache.h"
#include "kv/page_pool.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "quality/kv_calibration.h"
#include "quality/perplexity.h"
#include "test_util.h"

namespace densa {
namespace {

using testing::model_dir;

ThreadPool& pool() {
  static ThreadPool p(0);
  return p;
}

const ModelWeights& model(const std::string& name) {
  static std::map<std::string, ModelWeights> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto loaded = load_model(model_dir(name) / "hf");
    CHECK(loaded.is_ok()) << loaded.status().to_string();
    it = cache.emplace(name, std::move(loaded.value())).first;
  }
  return it->second;
}

// The first 2048 tokens of the training split (calibration never sees validation text).
std::vector<TokenId> calibration_tokens(const ModelWeights& w) {
  const std::string text = testing::read_text(testing::data_dir() / "tinystories" / "train.txt");
  std::vector<TokenId> ids = w.tokenizer->encode(std::string_view(text).substr(0, 20000), true);
  CHECK(ids.size() >= 2048u) << ids.size();
  ids.resize(2048);
  return ids;
}

const char* kModels[] = {"tinystories-llama-1m", "tinystories-mixtral-3.6m"};

// Calibrating on golden prompt 0 finds exactly the maxima of its golden K (post-RoPE) and V.
TEST(KvFp8Calibration, AmaxEqualsGoldenKvMaxima) {
  const ModelWeights& w = model("tinystories-llama-1m");
  const auto golden = testing::read_json(model_dir("tinystories-llama-1m") / "golden" / "golden.json");
  // prompt0.kv.f32.bin covers prompt 0 plus its 48 greedy tokens (62 positions).
  auto prompt = golden["prompts"][0]["prompt_ids"].get<std::vector<TokenId>>();
  const auto greedy = golden["prompts"][0]["greedy_ids"].get<std::vector<TokenId>>();
  prompt.insert(prompt.end(), greedy.begin(), greedy.end());
  const auto kv = testing::read_binary<float>(model_dir("tinystories-llama-1m") / "golden" / "prompt0.kv.f32.bin");
  const int L = 4, H = 4, hd = 16, n = static_cast<int>(prompt.size());
  ASSERT_EQ(kv.size(), static_cast<size_t>(L) * 2 * H * n * hd);
  const std::vector<float> got = kv_calibration_amax(w, prompt, KvCalibrationOptions{}, &pool());
  ASSERT_EQ(got.size(), static_cast<size_t>(L) * 2 * H);
  for (int i = 0; i < L * 2 * H; ++i) {
    float want = 0;
    for (int j = 0; j < n * hd; ++j) want = std::max(want, std::fabs(kv[static_cast<size_t>(i) * n * hd + j]));
    EXPECT_NEAR(got[i], want, 1e-4 * want + 1e-5) << "layer " << i / 8 << " kv " << (i / 4) % 2 << " head " << i % 4;
  }
  const KvScales s = calibrate_kv_scales(w, prompt, KvCalibrationOptions{}, &pool());
  EXPECT_EQ(s.source, KvScaleSource::kCalibration);
  EXPECT_EQ(s.calibration_tokens, n);
  EXPECT_FLOAT_EQ(s.values[3], got[3] / 448.0f);
  // No checkpoint scales, no tokens: the built-in passage is used.
  auto builtin = kv_scales_for_model(w, {}, KvCalibrationOptions{}, &pool());
  ASSERT_TRUE(builtin.is_ok());
  EXPECT_EQ(builtin->source, KvScaleSource::kCalibration);
  EXPECT_GT(builtin->calibration_tokens, 200);
  EXPECT_TRUE(validate_kv_scales(builtin.value(), L, H).is_ok());
}

// k_scale / v_scale tensors in a checkpoint win over calibration: per-layer scalars are
// broadcast to every kv head, per-head vectors kept; a checkpoint with only some is an error.
TEST(KvFp8Checkpoint, ReadsKScaleVScaleTensors) {
  namespace fs = std::filesystem;
  const fs::path src = model_dir("tinystories-llama-1m") / "hf";
  auto file = SafetensorsFile::open(src / "model.safetensors");
  ASSERT_TRUE(file.is_ok());
  const auto original = testing::safetensors_tensors_from(file.value());
  auto f32_bytes = [](std::vector<float> v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  };
  for (int layers_with_scales : {4, 1}) {
    const fs::path dir = testing::fresh_temp_dir("kv_scales_" + std::to_string(layers_with_scales));
    for (const char* f : {"config.json", "tokenizer.model"}) fs::copy_file(src / f, dir / f);
    auto tensors = original;
    for (int l = 0; l < layers_with_scales; ++l) {
      const std::string pre = "model.layers." + std::to_string(l) + ".self_attn.";
      tensors.push_back({pre + "k_scale", "F32", {}, f32_bytes({0.01f * (l + 1)})});
      tensors.push_back({pre + "v_scale", "F32", {4}, f32_bytes({0.1f, 0.2f, 0.3f, 0.4f * (l + 1)})});
    }
    testing::write_file(dir / "model.safetensors", testing::serialize_safetensors(tensors));
    auto loaded = load_model(dir);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    auto scales = kv_scales_for_model(loaded.value(), {}, KvCalibrationOptions{}, &pool());
    if (layers_with_scales == 1) {
      EXPECT_FALSE(scales.is_ok());
    } else {
      ASSERT_TRUE(scales.is_ok()) << scales.status().to_string();
      EXPECT_EQ(scales->source, KvScaleSource::kCheckpoint);
      EXPECT_EQ(scales->at(2, 0, 3), 0.03f);
      EXPECT_EQ(scales->at(2, 0, 0), 0.03f);
      EXPECT_EQ(scales->at(3, 1, 1), 0.2f);
      EXPECT_EQ(scales->at(3, 1, 3), 0.4f * 4);
      EXPECT_EQ(kv_cache_mode_line(DType::kFP8E4M3, KvScaleMode::kStatic, &scales.value())
                    .rfind("kv cache: fp8_e4m3, static scales from the checkpoint (", 0),
                0u);
      // A tensor-parallel slice reads its own kv heads' scales: rank 1 of 2 holds heads 2 and 3.
      LoadOptions slice;
      slice.parallel = ParallelLayout::of_rank(2, 1, 1);
      auto rank1 = load_model(dir, slice);
      ASSERT_TRUE(rank1.is_ok()) << rank1.status().to_string();
      auto mine = read_checkpoint_kv_scales(rank1.value());
      ASSERT_TRUE(mine.is_ok() && mine->has_value()) << (mine.is_ok() ? "none" : mine.status().to_string());
      EXPECT_EQ((*mine)->num_kv_heads, 2);
      EXPECT_EQ((*mine)->at(3, 1, 0), 0.3f);
      EXPECT_EQ((*mine)->at(3, 1, 1), 0.4f * 4);
      EXPECT_EQ((*mine)->at(2, 0, 1), 0.03f);
    }
    fs::remove_all(dir);
  }
  // The fixture itself has none.
  auto none = read_checkpoint_kv_scales(model("tinystories-llama-1m"));
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
}

class KvFp8Fixture : public ::testing::TestWithParam<const char*> {};

TEST_P(KvFp8Fixture, PerplexityWithinOnePercentOfBf16) {
  const ModelWeights& w = model(GetParam());
  const auto ids = testing::validation_ids(GetParam());
  const KvScales scales = calibrate_kv_scales(w, calibration_tokens(w), KvCalibrationOptions{}, &pool());
  PerplexityOptions bf16;
  bf16.kv_dtype = DType::kBF16;
  const PerplexityResult base = compute_perplexity(w, ids, bf16, &pool());
  for (KvScaleMode mode : {KvScaleMode::kStatic, KvScaleMode::kDynamic}) {
    PerplexityOptions o;
    o.kv_dtype = DType::kFP8E4M3;
    o.kv_scale_mode = mode;
    o.kv_scales = mode == KvScaleMode::kStatic ? &scales : nullptr;
    const PerplexityResult r = compute_perplexity(w, ids, o, &pool());
    const std::string line = kv_cache_mode_line(o.kv_dtype, mode, o.kv_scales);
    EXPECT_NEAR(r.ppl_all, base.ppl_all, 0.01 * base.ppl_all) << line;
    EXPECT_NEAR(r.ppl_second_half, base.ppl_second_half, 0.01 * base.ppl_second_half) << line;
    std::printf("%s: %s: ppl %.4f (bf16 %.4f), second half %.4f (bf16 %.4f)\n", GetParam(),
                line.c_str(), r.ppl_all, base.ppl_all, r.ppl_second_half, base.ppl_second_half);
  }
}

// The golden greedy continuations are unchanged with a BF16 cache. Both fixtures' golden
// top-1/top-2 margins stay >= 0.0089 logits; a BF16 cache moves logits by ~1e-3 on these
// models, so every step must agree (margin floor 0.005 leaves 5x room).
TEST_P(KvFp8Fixture, GoldenGreedyUnchangedWithBf16Cache) {
  const ModelWeights& w = model(GetParam());
  const auto golden = testing::read_json(model_dir(GetParam()) / "golden" / "golden.json");
  int idx = 0;
  for (const auto& p : golden["prompts"]) {
    const auto prompt = p["prompt_ids"].get<std::vector<TokenId>>();
    const auto want = p["greedy_ids"].get<std::vector<TokenId>>();
    const auto margins = p["top1_top2_margins"].get<std::vector<double>>();
    GenerateOptions opts;
    opts.max_new_tokens = static_cast<int>(want.size());
    opts.sampling.temperature = 0.0f;
    opts.stop_at_eos = false;
    opts.kv_dtype = DType::kBF16;
    const auto got = generate(w, prompt, opts, &pool(), [](TokenId, std::span<const float>) { return true; });
    size_t must = 0;
    while (must < want.size() && margins[must] >= 0.005) ++must;
    EXPECT_EQ(must, want.size()) << "a golden margin below the floor: prompt " << idx;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < must; ++i) ASSERT_EQ(got[i], want[i]) << "prompt " << idx << " step " << i;
    ++idx;
  }
}

// Two sequences decoded together from a PagePool with interleaved 16-token pages give
// bit-identical logits to each sequence alone in a contiguous cache: bf16 and both fp8 modes.
TEST_P(KvFp8Fixture, PagedEqualsContiguous) {
  const ModelWeights& w = model(GetParam());
  const ModelConfig& cfg = w.config;
  const KvScales scales = calibrate_kv_scales(w, calibration_tokens(w), KvCalibrationOptions{}, &pool());
  const auto golden = testing::read_json(model_dir(GetParam()) / "golden" / "golden.json");
  std::vector<std::vector<TokenId>> seqs;
  for (int s = 0; s < 2; ++s) {
    auto t = golden["prompts"][s]["prompt_ids"].get<std::vector<TokenId>>();
    const auto g = golden["prompts"][s]["greedy_ids"].get<std::vector<TokenId>>();
    t.insert(t.end(), g.begin(), g.end());
    seqs.push_back(t);
  }
  struct Mode { DType dtype; KvScaleMode mode; };
  for (Mode m : {Mode{DType::kBF16, KvScaleMode::kNone}, Mode{DType::kFP8E4M3, KvScaleMode::kStatic},
                 Mode{DType::kFP8E4M3, KvScaleMode::kDynamic}}) {
    const KvScales* sc = m.mode == KvScaleMode::kStatic ? &scales : nullptr;
    SCOPED_TRACE(kv_cache_mode_line(m.dtype, m.mode, sc));
    // Contiguous: all positions of each sequence in one prefill.
    std::vector<std::vector<float>> want;
    for (const auto& t : seqs) want.push_back(prompt_logits(w, t, m.dtype, &pool(), m.mode, sc));
    // Paged: pages allocated alternately for the two sequences; a 20-token prefill chunk
    // each, then the rest one token per step for both sequences in one batch.
    const KvLayout layout{cfg.num_layers, cfg.num_kv_heads, cfg.head_dim, 16, m.dtype, m.mode};
    auto created = PagePool::create(layout, layout.page_bytes() * 32);
    ASSERT_TRUE(created.is_ok());
    PagePool& pp = created.value();
    std::vector<int32_t> table[2];
    for (int i = 0; i < 8; ++i)
      for (int s = 0; s < 2; ++s) table[s].push_back(pp.allocate()->value);
    std::vector<int32_t> flat(table[0]);
    flat.insert(flat.end(), table[1].begin(), table[1].end());
    const std::vector<int32_t> offsets = {0, 8, 16};
    const KvView kv{layout, pp.base(), flat, offsets, sc ? sc->values.data() : nullptr};
    ForwardScratch scratch;
    const int V = cfg.vocab_size;
    const size_t len = std::min(seqs[0].size(), seqs[1].size());
    std::vector<float> logits(static_cast<size_t>(2 * 20) * V);
    int32_t done = 0;
    while (done < static_cast<int32_t>(len)) {
      const int step = done == 0 ? 20 : 1;
      std::vector<TokenId> tok;
      std::vector<int32_t> pos, seq, rows;
      for (int s = 0; s < 2; ++s)
        for (int i = 0; i < step; ++i) {
          rows.push_back(static_cast<int32_t>(tok.size()));
          tok.push_back(seqs[s][done + i]);
          pos.push_back(done + i);
          seq.push_back(s);
        }
      forward(w, ForwardBatch{tok, pos, seq, rows}, kv, scratch, &pool(), logits.data());
      for (int s = 0; s < 2; ++s)
        for (int i = 0; i < step; ++i)
          for (int c = 0; c < V; ++c)
            ASSERT_EQ(logits[(static_cast<size_t>(s) * step + i) * V + c],
                      want[s][static_cast<size_t>(done + i) * V + c])
                << "seq " << s << " pos " << done + i;
      done += step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvFp8, KvFp8Fixture, ::testing::ValuesIn(kModels),
                         [](const auto& info) {
                           return std::string(info.param).find("llama") != std::string::npos ? "Dense" : "Moe";
                         });

}  // namespace
}  // namespace densa
