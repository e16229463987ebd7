// The forward pass against the fixtures' golden fp32 logits and greedy continuations, for
// every format the fixtures ship (HF F32 / BF16, GGUF F32 / F16).
#include "model/forward.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kv/contiguous_kv_cache.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "test_util.h"

namespace densa {
namespace {

using testing::model_dir;
using testing::read_binary;
using testing::read_json;

struct Variant {
  std::string model;  // fixture directory
  std::string path;   // relative to it
  // Bound on max |logit - golden| at a position. F32 weights: summation order only (README:
  // ~2e-5). F16 weights: the README's own F16 run differs by ~8e-3. BF16 weights: ~0.08 for
  // the dense model.
  double max_abs_tol;
  // Fraction of positions allowed above max_abs_tol. Only the BF16 MoE needs it: BF16 router
  // weights flip the expert choice at near-tie positions (README: router gaps down to 1.8e-5,
  // max |dlogit| 2.4 at those single positions); those positions are bounded by flip_tol.
  double max_frac_over;
  double flip_tol;
  // Greedy tokens must equal the golden ones up to the first step whose golden top-1/top-2
  // margin is below this (2x the logit error bound: below it the argmax may legitimately flip).
  double margin_floor;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.model << "/" << v.path; }

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  std::string s = info.param.model + "_" + info.param.path;
  for (char& c : s) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// The golden logits are fp32 compute; hf-bf16's tolerances are for BF16-rounded weights alone,
// so BF16 matrices keep fp32 activations.
const LoadOptions kExactBf16{.bf16_f32_activations = true};

class ForwardGolden : public ::testing::TestWithParam<Variant> {
 protected:
  static ThreadPool& pool() {
    static ThreadPool p(0);
    return p;
  }
};

TEST_P(ForwardGolden, LogitsMatchGolden) {
  const Variant& v = GetParam();
  auto loaded = load_model(model_dir(v.model) / v.path, kExactBf16);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const ModelWeights& w = loaded.value();
  const auto golden = read_json(model_dir(v.model) / "golden" / "golden.json");
  int idx = 0;
  for (const auto& p : golden["prompts"]) {
    std::vector<TokenId> tokens = p["prompt_ids"].get<std::vector<TokenId>>();
    const auto greedy = p["greedy_ids"].get<std::vector<TokenId>>();
    tokens.insert(tokens.end(), greedy.begin(), greedy.end());
    const auto want = read_binary<float>(model_dir(v.model) / "golden" / p["logits_file"].get<std::string>());
    ASSERT_EQ(want.size(), tokens.size() * 1024u);
    const std::vector<float> got = prompt_logits(w, tokens, DType::kF32, &pool());
    const size_t num_pos = tokens.size();
    int over = 0;
    double worst = 0;
    for (size_t r = 0; r < num_pos; ++r) {
      double row_max = 0;
      for (size_t c = 0; c < 1024; ++c)
        row_max = std::max(row_max, std::fabs(double(got[r * 1024 + c]) - want[r * 1024 + c]));
      worst = std::max(worst, row_max);
      over += row_max > v.max_abs_tol;
    }
    EXPECT_LE(over, static_cast<int>(v.max_frac_over * num_pos)) << "prompt " << idx << " worst " << worst;
    EXPECT_LE(worst, std::max(v.max_abs_tol, v.flip_tol)) << "prompt " << idx;
    ++idx;
  }
}

TEST_P(ForwardGolden, GreedyContinuationMatchesGolden) {
  const Variant& v = GetParam();
  auto loaded = load_model(model_dir(v.model) / v.path, kExactBf16);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const auto golden = read_json(model_dir(v.model) / "golden" / "golden.json");
  int idx = 0;
  for (const auto& p : golden["prompts"]) {
    const auto prompt = p["prompt_ids"].get<std::vector<TokenId>>();
    const auto want = p["greedy_ids"].get<std::vector<TokenId>>();
    GenerateOptions opts;
    opts.max_new_tokens = static_cast<int>(want.size());
    opts.sampling.temperature = 0.0f;
    opts.stop_at_eos = false;
    const auto got = generate(loaded.value(), prompt, opts, &pool(),
                              [](TokenId, std::span<const float>) { return true; });
    const auto margins = p["top1_top2_margins"].get<std::vector<double>>();
    size_t must = 0;  // steps whose golden margin leaves room for exact agreement
    while (must < want.size() && margins[must] >= v.margin_floor) ++must;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < must; ++i) ASSERT_EQ(got[i], want[i]) << "prompt " << idx << " step " << i;
    if (v.margin_floor == 0.0) {
      EXPECT_EQ(got, want) << "prompt " << idx;
    }
    ++idx;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ForwardGolden,
    ::testing::Values(
        Variant{"tinystories-llama-1m", "hf", 1e-3, 0, 0, 0.0},
        Variant{"tinystories-llama-1m", "gguf/tinystories-llama-1m-f32.gguf", 1e-3, 0, 0, 0.0},
        Variant{"tinystories-llama-1m", "gguf/tinystories-llama-1m-f16.gguf", 3e-2, 0, 0, 0.0},
        Variant{"tinystories-llama-1m", "hf-bf16", 0.25, 0, 0, 0.2},
        Variant{"tinystories-mixtral-3.6m", "hf", 1e-3, 0, 0, 0.0},
        Variant{"tinystories-mixtral-3.6m", "gguf/tinystories-mixtral-3.6m-f32.gguf", 1e-3, 0, 0, 0.0},
        Variant{"tinystories-mixtral-3.6m", "gguf/tinystories-mixtral-3.6m-f16.gguf", 3e-2, 0, 0, 0.0},
        Variant{"tinystories-mixtral-3.6m", "hf-bf16", 0.25, 0.05, 3.0, 0.2}),
    variant_name);

// The MoE routing decisions equal the golden ones at every layer and position (F32 weights).
TEST(ForwardRouting, MixtralSelectedExpertsMatchGolden) {
  auto loaded = load_model(model_dir("tinystories-mixtral-3.6m") / "hf");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const ModelWeights& w = loaded.value();
  const auto golden = read_json(model_dir("tinystories-mixtral-3.6m") / "golden" / "golden.json");
  for (const auto& p : golden["prompts"]) {
    std::vector<TokenId> tokens = p["prompt_ids"].get<std::vector<TokenId>>();
    const auto greedy = p["greedy_ids"].get<std::vector<TokenId>>();
    tokens.insert(tokens.end(), greedy.begin(), greedy.end());
    const int n = static_cast<int>(tokens.size());
    std::vector<int32_t> positions(n), seq(n, 0);
    for (int i = 0; i < n; ++i) positions[i] = i;
    const int32_t last = n - 1;
    ContiguousKvCache cache(w.config.num_layers, w.config.num_kv_heads, w.config.head_dim, n, 1, DType::kF32);
    ForwardScratch scratch;
    scratch.full_last_layer = true;  // the last layer's record for every position, not only the logit row
    std::vector<float> logits(1024);
    forward(w, ForwardBatch{tokens, positions, seq, std::span<const int32_t>(&last, 1)}, cache.view(),
            scratch, nullptr, logits.data());
    const auto& sel = p["router"]["selected_experts_per_layer_per_position"];
    const int L = w.config.num_layers, K = w.config.num_experts_per_tok;
    ASSERT_EQ(static_cast<int>(sel.size()), L);
    int mismatches = 0;
    for (int l = 0; l < L; ++l) {
      ASSERT_EQ(static_cast<int>(sel[l].size()), n);
      for (int t = 0; t < n; ++t) {
        std::vector<int> want = sel[l][t].get<std::vector<int>>();
        std::vector<int> got(scratch.selected_experts.begin() + (static_cast<int64_t>(l) * n + t) * K,
                             scratch.selected_experts.begin() + (static_cast<int64_t>(l) * n + t + 1) * K);
        std::sort(want.begin(), want.end());
        std::sort(got.begin(), got.end());
        mismatches += want != got;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// The last layer run for the logit rows alone (the default) gives the logits of the whole layer
// bit for bit and stores the same K/V, for two sequences in one batch and any set of logit rows
// (the last of each, scattered ones, none, all), on one thread and on two; its routing record
// keeps each logit row's experts and -1 for the other tokens, every earlier layer's unchanged.
TEST(ForwardLastLayer, LogitRowsAloneGiveTheWholeLayersBits) {
  ThreadPool two(2);
  for (const char* model : {"tinystories-llama-1m", "tinystories-mixtral-3.6m"}) {
    auto loaded = load_model(model_dir(model) / "hf");
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    const ModelWeights& w = loaded.value();
    const ModelConfig& c = w.config;
    std::vector<TokenId> tokens = testing::validation_ids(model);
    ASSERT_GE(tokens.size(), 70u);
    tokens.resize(70);
    // Sequence 0: tokens 0..39 at positions 0..39; sequence 1: tokens 40..69 at 0..29.
    const int n = 70;
    std::vector<int32_t> positions(n), seq(n);
    for (int i = 0; i < n; ++i) {
      seq[i] = i < 40 ? 0 : 1;
      positions[i] = i < 40 ? i : i - 40;
    }
    std::vector<int32_t> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    const std::vector<std::vector<int32_t>> row_sets = {{39, 69}, {0, 7, 39, 52, 69}, {}, all, {5}};
    const int K = std::max(1, c.num_experts_per_tok);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two}) {
      for (const std::vector<int32_t>& rows : row_sets) {
        SCOPED_TRACE(std::string(model) + ", " + std::to_string(rows.size()) + " logit rows, " +
                     (pool != nullptr ? "2 threads" : "1 thread"));
        std::vector<float> logits[2];
        std::vector<int32_t> record[2];
        ContiguousKvCache cache_full(c.num_layers, c.num_kv_heads, c.head_dim, 40, 2, DType::kBF16);
        ContiguousKvCache cache_rows(c.num_layers, c.num_kv_heads, c.head_dim, 40, 2, DType::kBF16);
        for (int full = 0; full < 2; ++full) {
          ForwardScratch scratch;
          scratch.full_last_layer = full == 1;
          logits[full].assign(rows.size() * c.vocab_size, -1.0f);
          forward(w, ForwardBatch{tokens, positions, seq, rows}, (full ? cache_full : cache_rows).view(), scratch, pool,
                  logits[full].data());
          record[full].assign(scratch.selected_experts.begin(),
                              scratch.selected_experts.begin() + static_cast<int64_t>(c.num_layers) * n * K);
        }
        ASSERT_EQ(logits[0].size(), logits[1].size());
        if (!rows.empty()) {
          ASSERT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
        }
        const KvView kf = cache_full.view(), kr = cache_rows.view();
        const size_t row_bytes = static_cast<size_t>(c.head_dim * kf.layout.elem_bytes());
        for (int sq = 0; sq < 2; ++sq) {
          for (int pos = 0; pos < (sq == 0 ? 40 : 30); ++pos) {
            for (int l = 0; l < c.num_layers; ++l) {
              for (int which = 0; which < 2; ++which) {
                for (int h = 0; h < c.num_kv_heads; ++h) {
                  const int64_t off = kf.layout.data_offset(l, which, h, pos);
                  ASSERT_EQ(0, std::memcmp(kf.page_ptr(kf.page_of(sq, pos)) + off, kr.page_ptr(kr.page_of(sq, pos)) + off,
                                           row_bytes))
                      << "the stored K/V: sequence " << sq << " position " << pos << " layer " << l;
                }
              }
            }
          }
        }
        const int64_t last = static_cast<int64_t>(c.num_layers - 1) * n * K;
        EXPECT_TRUE(std::equal(record[0].begin(), record[0].begin() + last, record[1].begin())) << "earlier layers";
        for (int t = 0; t < n; ++t) {
          const bool logit_row = std::find(rows.begin(), rows.end(), t) != rows.end();
          for (int k = 0; k < K; ++k) {
            const int32_t got = record[0][last + t * K + k], full = record[1][last + t * K + k];
            ASSERT_EQ(got, logit_row ? full : -1) << "token " << t;
          }
        }
        if (c.num_experts > 0 && !rows.empty()) {
          EXPECT_GE(record[0][last + rows.back() * K], 0) << "a routed row";
        }
      }
    }
  }
}

// A 256-token prefill of the MoE fixture (enough routed rows that moe_ffn copies them and sums
// the experts' outputs on the pool) gives the same logits, bit for bit, on one thread and on
// two: every split over threads is over independent outputs.
TEST(ForwardThreads, MixtralPrefillSameBitsOnOneAndTwoThreads) {
  auto loaded = load_model(model_dir("tinystories-mixtral-3.6m") / "hf");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const ModelWeights& w = loaded.value();
  std::vector<TokenId> tokens = testing::validation_ids("tinystories-mixtral-3.6m");
  ASSERT_GE(tokens.size(), 256u);
  tokens.resize(256);
  ASSERT_GE(tokens.size() * w.config.num_experts_per_tok * w.config.hidden_size, 2u << 15);
  ThreadPool two(2);
  const std::vector<float> one_thread = prompt_logits(w, tokens, DType::kBF16, nullptr);
  const std::vector<float> two_threads = prompt_logits(w, tokens, DType::kBF16, &two);
  ASSERT_EQ(one_thread.size(), two_threads.size());
  EXPECT_EQ(0, std::memcmp(one_thread.data(), two_threads.data(), one_thread.size() * sizeof(float)));
}

}  // namespace
}  // namespace densa
