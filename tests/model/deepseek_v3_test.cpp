// deepseek_v3 (MLA) against the PyTorch reference (tests/reference/deepseek_v3_ref.py: float64,
// HF's simple MLA form) for two tiny checkpoints (q_lora_rank 32 and null): config parsing,
// YaRN numbers, golden logits with F32 / BF16 / FP8 latent KV on a paged pool (shuffled pages,
// several sequences per batch, chunked prefill across pages, then one-token decode steps),
// greedy continuations, the MoE routing record, and quantize-on-load.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "exec/runner.h"
#include "kv/contiguous_kv_cache.h"
#include "kv/page_pool.h"
#include "model/arch_deepseek_v3.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "quality/kv_calibration.h"
#include "test_util.h"

namespace densa {
namespace {

using testing::read_binary;
using testing::read_json;

std::filesystem::path ref_dir(const std::string& variant) {
  return std::filesystem::path(DENSA_SOURCE_DIR) / "tests/data/reference" / variant;
}

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

const ModelWeights& model(const std::string& variant) {
  static std::map<std::string, std::unique_ptr<ModelWeights>> cache;
  auto& slot = cache[variant];
  if (!slot) {
    // BF16 matrices on fp32 activations: the references compute in fp32 with BF16-rounded weights.
    auto r = load_model(ref_dir(variant), LoadOptions{.bf16_f32_activations = true});
    CHECK(r.is_ok()) << r.status().to_string();
    slot = std::make_unique<ModelWeights>(std::move(r).value());
  }
  return *slot;
}

struct Golden {
  std::vector<std::vector<TokenId>> prompt, greedy, tokens;  // tokens = prompt + greedy
  std::vector<std::vector<float>> logits;                    // [rows, 1024]
  std::vector<double> min_margin;
  nlohmann::json json;
};

Golden golden(const std::string& variant) {
  Golden g;
  g.json = read_json(ref_dir(variant) / "golden.json");
  int i = 0;
  for (const auto& p : g.json["prompts"]) {
    g.prompt.push_back(p["prompt_ids"].get<std::vector<TokenId>>());
    g.greedy.push_back(p["greedy_ids"].get<std::vector<TokenId>>());
    g.tokens.push_back(g.prompt.back());
    g.tokens.back().insert(g.tokens.back().end(), g.greedy.back().begin(), g.greedy.back().end());
    g.logits.push_back(read_binary<float>(ref_dir(variant) / ("prompt" + std::to_string(i++) + ".logits.f32.bin")));
    g.min_margin.push_back(p["min_margin"].get<double>());
  }
  return g;
}

double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

size_t argmax(const float* row, size_t n) { return std::max_element(row, row + n) - row; }

// Teacher-forced logits of every sequence of g at every position, computed on a paged pool:
// pages of page_size tokens handed out in a shuffled order, all sequences in each batch; a
// sequence feeds `chunk` tokens per step while in its prompt, then one token per step.
std::vector<std::vector<float>> paged_logits(const ModelWeights& w, const Golden& g, DType kv_dtype,
                                             int page_size, int chunk, std::vector<int32_t>* selected_l1 = nullptr) {
  const ModelConfig& cfg = w.config;
  const KvLayout layout = kv_layout_for(cfg, page_size, kv_dtype);
  const size_t num_seqs = g.tokens.size();
  int total_pages = 0;
  for (const auto& t : g.tokens) total_pages += (static_cast<int>(t.size()) + page_size - 1) / page_size;
  Result<PagePool> made = PagePool::create(layout, layout.page_bytes() * total_pages);
  CHECK(made.is_ok()) << made.status().to_string();
  PagePool pool_ = std::move(made).value();
  std::vector<int32_t> ids;
  for (int p = 0; p < total_pages; ++p) ids.push_back(pool_.allocate()->value);
  std::mt19937 rng(42);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> table, offsets = {0};
  size_t next = 0;
  for (const auto& t : g.tokens) {
    for (size_t p = 0; p < (t.size() + page_size - 1) / page_size; ++p) table.push_back(ids[next++]);
    offsets.push_back(static_cast<int32_t>(table.size()));
  }
  KvView kv;
  kv.layout = layout;
  kv.pool = pool_.base();
  kv.block_table = table;
  kv.block_offsets = offsets;

  std::vector<std::vector<float>> out(num_seqs);
  std::vector<size_t> done(num_seqs, 0);
  ForwardScratch scratch;
  const size_t V = static_cast<size_t>(cfg.vocab_size);
  while (true) {
    std::vector<TokenId> tokens;
    std::vector<int32_t> positions, seq, rows;
    for (size_t s = 0; s < num_seqs; ++s) {
      const size_t n = done[s] < g.prompt[s].size() ? std::min<size_t>(chunk, g.prompt[s].size() - done[s])
                                                    : std::min<size_t>(1, g.tokens[s].size() - done[s]);
      for (size_t k = 0; k < n; ++k) {
        rows.push_back(static_cast<int32_t>(tokens.size()));
        tokens.push_back(g.tokens[s][done[s] + k]);
        positions.push_back(static_cast<int32_t>(done[s] + k));
        seq.push_back(static_cast<int32_t>(s));
      }
    }
    if (tokens.empty()) break;
    std::vector<float> logits(rows.size() * V);
    forward(w, ForwardBatch{tokens, positions, seq, rows}, kv, scratch, &pool(), logits.data());
    const int top_k = cfg.num_experts_per_tok;
    for (size_t r = 0; r < rows.size(); ++r) {
      out[seq[r]].insert(out[seq[r]].end(), logits.begin() + r * V, logits.begin() + (r + 1) * V);
      if (selected_l1 != nullptr && seq[r] == static_cast<int32_t>(num_seqs) - 1) {
        const int32_t* sel = scratch.selected_experts.data() + (1 * tokens.size() + r) * top_k;
        std::vector<int32_t> e(sel, sel + top_k);
        std::sort(e.begin(), e.end());
        selected_l1->insert(selected_l1->end(), e.begin(), e.end());
      }
      ++done[seq[r]];
    }
  }
  return out;
}

TEST(DeepseekV3Config, ParsesMlaMoeAndYarn) {
  const ModelConfig& c = model("deepseek_v3").config;
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.mla.q_lora_rank, 32);
  EXPECT_EQ(c.mla.kv_lora_rank, 32);
  EXPECT_EQ(c.mla.qk_nope_head_dim, 16);
  EXPECT_EQ(c.mla.qk_rope_head_dim, 8);
  EXPECT_EQ(c.mla.v_head_dim, 16);
  EXPECT_TRUE(c.mla.rope_interleave);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.moe_routing, MoeRouting::kSigmoidGrouped);
  EXPECT_EQ(c.n_group, 4);
  EXPECT_EQ(c.topk_group, 2);
  EXPECT_EQ(c.shared_expert_intermediate_size, 32);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(2));
  EXPECT_FLOAT_EQ(c.yarn.factor, 4.0f);
  EXPECT_EQ(c.yarn.original_max_position_embeddings, 64);
  EXPECT_FLOAT_EQ(c.yarn.mscale_all_dim, 0.8f);
  EXPECT_EQ(model("deepseek_v3_no_q_lora").config.mla.q_lora_rank, 0);
  EXPECT_TRUE(model("deepseek_v3_no_q_lora").layers[0].q_a.empty());
  EXPECT_FALSE(model("deepseek_v3_no_q_lora").layers[0].wq.empty());
  // The cache layout: one latent row of 32 + 8 values per token per layer.
  const KvLayout l = kv_layout_for(c, 16, DType::kBF16);
  EXPECT_TRUE(l.is_latent());
  EXPECT_EQ(l.latent_dim, 40);
  EXPECT_EQ(l.page_bytes(), 3 * 16 * 40 * 2);
}

TEST(DeepseekV3Config, KimiK2YarnNumbers) {
  Result<ModelConfig> c = parse_hf_config(std::filesystem::path(DENSA_SOURCE_DIR) / "tests/data/configs/kimi-k2.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->mla.kv_lora_rank + c->mla.qk_rope_head_dim, 576);
  EXPECT_EQ(c->first_k_dense_replace, 1);
  EXPECT_EQ(c->shared_expert_intermediate_size, 2048);
  // mscale == mscale_all_dim: cos/sin unscaled; softmax scale 192^-0.5 * (0.1 ln 32 + 1)^2.
  EXPECT_FLOAT_EQ(mla_rope_attn_factor(*c), 1.0f);
  const double m = 0.1 * std::log(32.0) + 1.0;
  EXPECT_NEAR(mla_softmax_scale(*c), m * m / std::sqrt(192.0), 1e-7);
  // beta_fast = beta_slow = 1: one correction dim; below it frequencies are kept, above it
  // divided by the factor (32).
  const std::vector<double> f = mla_rope_inv_freq(*c);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_NEAR(f[31], std::pow(50000.0, -62.0 / 64) / 32.0, 1e-18);
}

TEST(DeepseekV3Config, BadConfigsAreClearErrors) {
  const std::string base = testing::read_text(ref_dir("deepseek_v3") / "config.json");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = base;
    t.replace(t.find(from), from.size(), to);
    return parse_hf_config_text(t, "cfg");
  };
  auto r1 = with("\"type\": \"yarn\"", "\"type\": \"dynamic\"");
  ASSERT_FALSE(r1.is_ok());
  EXPECT_NE(r1.status().message().find("rope_scaling type 'dynamic'"), std::string::npos);
  auto r2 = with("\"scoring_func\": \"sigmoid\"", "\"scoring_func\": \"softmax\"");
  ASSERT_FALSE(r2.is_ok());
  EXPECT_NE(r2.status().message().find("scoring_func"), std::string::npos);
  auto r3 = with("\"kv_lora_rank\": 32", "\"kv_lora_rank\": 0");
  ASSERT_FALSE(r3.is_ok());
  auto r4 = with("\"n_group\": 4", "\"n_group\": 3");
  ASSERT_FALSE(r4.is_ok());
  EXPECT_NE(r4.status().message().find("n_group"), std::string::npos);
}

struct KvCase {
  std::string variant;
  DType kv_dtype;
  int page_size;
  int chunk;
  // Bound on max |logit - golden| at a position, and the fraction of positions allowed above
  // it: a rounded latent can flip a near-tie router choice (sigmoid scores, grouped top-k),
  // which moves that position's logits by several units.
  double max_abs_tol;
  double max_frac_over;
  double min_top1_agree;  // fraction of positions whose argmax equals the golden argmax
};

void PrintTo(const KvCase& c, std::ostream* os) {
  *os << c.variant << "_" << dtype_name(c.kv_dtype) << "_page" << c.page_size << "_chunk" << c.chunk;
}

class DeepseekV3Golden : public ::testing::TestWithParam<KvCase> {
 protected:
  // These compare against references computed in fp32 with BF16-rounded weights.
};

// Every position of every prompt (prompt + greedy, teacher-forced) on the paged latent cache.
TEST_P(DeepseekV3Golden, PagedLogitsMatchReference) {
  const KvCase& kc = GetParam();
  const Golden g = golden(kc.variant);
  const auto got = paged_logits(model(kc.variant), g, kc.kv_dtype, kc.page_size, kc.chunk);
  size_t over = 0, agree = 0, total = 0;
  for (size_t s = 0; s < g.tokens.size(); ++s) {
    ASSERT_EQ(got[s].size(), g.logits[s].size());
    double worst = 0;
    size_t flips = 0;
    for (size_t r = 0; r < g.tokens[s].size(); ++r, ++total) {
      const float* a = got[s].data() + r * 1024;
      const float* b = g.logits[s].data() + r * 1024;
      const double d = max_abs_diff(a, b, 1024);
      worst = std::max(worst, d);
      over += d > kc.max_abs_tol;
      flips += argmax(a, 1024) != argmax(b, 1024);
    }
    agree += g.tokens[s].size() - flips;
    std::printf("[ info ] %s %s prompt %zu (%zu tokens): max |dlogit| %.2e, top-1 flips %zu\n", kc.variant.c_str(),
                dtype_name(kc.kv_dtype).data(), s, g.tokens[s].size(), worst, flips);
  }
  EXPECT_LE(over, kc.max_frac_over * total) << over << " of " << total << " positions above " << kc.max_abs_tol;
  EXPECT_GE(agree, kc.min_top1_agree * total) << agree << " of " << total;
}

// Greedy decoding through forward() on a contiguous latent cache, one token per step. A step
// may differ from the golden one only where the golden top-1/top-2 margin is below
// 2 * max_abs_tol (then the rest of the continuation legitimately diverges).
class DeepseekV3Greedy : public ::testing::TestWithParam<KvCase> {
 protected:
  // These compare against references computed in fp32 with BF16-rounded weights.
};

TEST_P(DeepseekV3Greedy, ContinuationsMatchReference) {
  const KvCase& kc = GetParam();
  const Golden g = golden(kc.variant);
  for (size_t s = 0; s < g.prompt.size(); ++s) {
    GenerateOptions o;
    o.max_new_tokens = static_cast<int>(g.greedy[s].size());
    o.sampling.temperature = 0.0f;
    o.stop_at_eos = false;
    o.kv_dtype = kc.kv_dtype;
    const std::vector<TokenId> got =
        generate(model(kc.variant), g.prompt[s], o, &pool(), [](TokenId, std::span<const float>) { return true; });
    ASSERT_EQ(got.size(), g.greedy[s].size());
    for (size_t k = 0; k < got.size(); ++k) {
      if (got[k] == g.greedy[s][k]) continue;
      const float* row = g.logits[s].data() + (g.prompt[s].size() - 1 + k) * 1024;
      std::vector<float> sorted(row, row + 1024);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      EXPECT_LT(sorted[0] - sorted[1], 2 * kc.max_abs_tol) << "prompt " << s << " flips at step " << k;
      std::printf("[ info ] prompt %zu flips at step %zu (golden margin %.4f)\n", s, k, sorted[0] - sorted[1]);
      break;
    }
  }
}

// Measured (2 cores, AVX-512): F32 KV max |dlogit| <= 1.5e-5 everywhere, no flips. BF16 KV:
// <= 0.09 except a few positions of the 88-token prompt where a router near-tie flips (up to
// 7.8), 2 top-1 flips in 164. FP8 KV (dynamic per-token scale, 3 mantissa bits): this tiny
// random-weight model is very sensitive; 137 / 164 (q_lora) and 150 / 164 top-1 agree.
INSTANTIATE_TEST_SUITE_P(
    Kv, DeepseekV3Golden,
    ::testing::Values(KvCase{"deepseek_v3", DType::kF32, 16, 24, 1e-4, 0.0, 1.0},
                      KvCase{"deepseek_v3", DType::kBF16, 16, 24, 0.15, 0.1, 0.97},
                      KvCase{"deepseek_v3", DType::kBF16, 4, 7, 0.15, 0.1, 0.97},
                      KvCase{"deepseek_v3", DType::kFP8E4M3, 16, 24, 1.0, 0.5, 0.75},
                      KvCase{"deepseek_v3_no_q_lora", DType::kF32, 8, 11, 1e-4, 0.0, 1.0},
                      KvCase{"deepseek_v3_no_q_lora", DType::kBF16, 8, 11, 0.15, 0.1, 0.97},
                      KvCase{"deepseek_v3_no_q_lora", DType::kFP8E4M3, 8, 11, 1.0, 0.5, 0.75}),
    [](const ::testing::TestParamInfo<KvCase>& info) {
      std::ostringstream os;
      PrintTo(info.param, &os);
      return os.str();
    });

// FP8 greedy runs are checked against the FP8 single-sequence oracle in the engine test.
INSTANTIATE_TEST_SUITE_P(
    Kv, DeepseekV3Greedy,
    ::testing::Values(KvCase{"deepseek_v3", DType::kF32, 16, 24, 1e-4, 0.0, 1.0},
                      KvCase{"deepseek_v3", DType::kBF16, 16, 24, 0.15, 0.1, 0.97},
                      KvCase{"deepseek_v3_no_q_lora", DType::kF32, 8, 11, 1e-4, 0.0, 1.0},
                      KvCase{"deepseek_v3_no_q_lora", DType::kBF16, 8, 11, 0.15, 0.1, 0.97}),
    [](const ::testing::TestParamInfo<KvCase>& info) {
      std::ostringstream os;
      PrintTo(info.param, &os);
      return os.str();
    });

// The paged pool (shuffled pages, several sequences per batch, chunked prefill) gives exactly
// the logits of the one-pass contiguous prefill, for every KV dtype: MLA attention is batch
// and page-size invariant, FP8 latent included.
TEST(DeepseekV3Paged, PagedEqualsContiguousBitForBit) {
  const Golden g = golden("deepseek_v3");
  for (DType dt : {DType::kBF16, DType::kFP8E4M3}) {
    const auto paged = paged_logits(model("deepseek_v3"), g, dt, 4, 5);
    for (size_t s = 0; s < g.tokens.size(); ++s) {
      const std::vector<float> one = prompt_logits(model("deepseek_v3"), g.tokens[s], dt, &pool(),
                                                   dt == DType::kFP8E4M3 ? KvScaleMode::kDynamic : KvScaleMode::kNone);
      ASSERT_EQ(one.size(), paged[s].size());
      EXPECT_EQ(one, paged[s]) << dtype_name(dt) << " prompt " << s;
    }
  }
}

// Static FP8 latent scales from a calibration pass over the golden sequences: two per layer
// (c_kv, k_pe; their ranges differ), and the teacher-forced logits stay within the bounds of
// the dynamic per-token FP8 case above (|dlogit| <= 1.0 at >= 50% of positions, top-1 >= 75%).
TEST(DeepseekV3StaticFp8, CalibratedScalesStayCloseToReference) {
  for (const std::string variant : {"deepseek_v3", "deepseek_v3_no_q_lora"}) {
    const ModelWeights& w = model(variant);
    const Golden g = golden(variant);
    std::vector<TokenId> calibration;
    for (const auto& t : g.tokens) calibration.insert(calibration.end(), t.begin(), t.end());
    const KvScales scales = calibrate_kv_scales(w, calibration, KvCalibrationOptions{}, &pool());
    ASSERT_EQ(scales.num_kv_heads, 1);
    ASSERT_EQ(scales.values.size(), static_cast<size_t>(w.config.num_layers) * 2);
    EXPECT_TRUE(validate_kv_scales(scales, w.config.num_layers, 1).is_ok());
    EXPECT_NE(scales.at(0, 0, 0), scales.at(0, 1, 0)) << "c_kv and k_pe share a scale";
    size_t over = 0, agree = 0, total = 0;
    double worst_fp8 = 0;
    for (size_t s = 0; s < g.tokens.size(); ++s) {
      const std::vector<float> got =
          prompt_logits(w, g.tokens[s], DType::kFP8E4M3, &pool(), KvScaleMode::kStatic, &scales);
      ASSERT_EQ(got.size(), g.logits[s].size());
      for (size_t r = 0; r < g.tokens[s].size(); ++r, ++total) {
        const double d = max_abs_diff(got.data() + r * 1024, g.logits[s].data() + r * 1024, 1024);
        worst_fp8 = std::max(worst_fp8, d);
        over += d > 1.0;
        agree += argmax(got.data() + r * 1024, 1024) == argmax(g.logits[s].data() + r * 1024, 1024);
      }
    }
    std::printf("[ info ] %s static fp8 latent KV: top-1 %zu / %zu, %zu positions above 1.0, max |dlogit| %.3f\n",
                variant.c_str(), agree, total, over, worst_fp8);
    EXPECT_GT(worst_fp8, 0.0) << "fp8 rounding left no trace: were the scales used?";
    EXPECT_LE(over, 0.5 * total);
    EXPECT_GE(agree, 0.75 * total);
  }
}

// The last layer's FFN run for the logit rows alone (the default) gives the logits of the whole
// layer bit for bit, for any set of logit rows, on one thread and on two; its routing record
// keeps each logit row's experts and -1 for the other tokens (forward.h).
TEST(DeepseekV3LastLayer, LogitRowsAloneGiveTheWholeLayersBits) {
  const ModelWeights& w = model("deepseek_v3");
  const ModelConfig& c = w.config;
  const Golden g = golden("deepseek_v3");
  const std::vector<TokenId>& tokens = g.tokens[0];
  const int n = static_cast<int>(tokens.size());
  ASSERT_GE(n, 12);
  std::vector<int32_t> positions(n), seq(n, 0);
  for (int i = 0; i < n; ++i) positions[i] = i;
  const int K = std::max(1, c.num_experts_per_tok);
  const int64_t last = static_cast<int64_t>(c.num_layers - 1) * n * K;
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool()}) {
    for (const std::vector<int32_t>& rows : std::vector<std::vector<int32_t>>{{n - 1}, {0, 5, n - 1}, {}}) {
      SCOPED_TRACE(std::to_string(rows.size()) + " logit rows");
      std::vector<float> logits[2];
      std::vector<int32_t> record[2];
      for (int full = 0; full < 2; ++full) {
        const ContiguousKvCache cache(kv_layout_for(c, n, DType::kBF16), 1);
        ForwardScratch scratch;
        scratch.full_last_layer = full == 1;
        logits[full].assign(rows.size() * c.vocab_size, -1.0f);
        forward(w, ForwardBatch{tokens, positions, seq, rows}, cache.view(), scratch, p, logits[full].data());
        record[full].assign(scratch.selected_experts.begin(), scratch.selected_experts.begin() + last + n * K);
      }
      EXPECT_EQ(logits[0], logits[1]);
      EXPECT_TRUE(std::equal(record[0].begin(), record[0].begin() + last, record[1].begin())) << "earlier layers";
      for (int t = 0; t < n; ++t) {
        const bool logit_row = std::find(rows.begin(), rows.end(), t) != rows.end();
        for (int k = 0; k < K; ++k) {
          ASSERT_EQ(record[0][last + t * K + k], logit_row ? record[1][last + t * K + k] : -1) << "token " << t;
        }
      }
      if (!rows.empty()) {
        EXPECT_GE(record[0][last + rows.back() * K], 0) << "the last layer is not a MoE layer";
      }
    }
  }
}

TEST(DeepseekV3Routing, SelectedExpertsMatchReference) {
  const Golden g = golden("deepseek_v3");
  std::vector<int32_t> sel;
  paged_logits(model("deepseek_v3"), g, DType::kF32, 16, 24, &sel);
  const auto want = g.json["prompts"].back()["router"]["1"]["selected"].get<std::vector<std::vector<int32_t>>>();
  ASSERT_EQ(sel.size(), want.size() * 2);
  size_t same = 0;
  for (size_t t = 0; t < want.size(); ++t) same += sel[2 * t] == want[t][0] && sel[2 * t + 1] == want[t][1];
  EXPECT_EQ(same, want.size());
}

TEST(DeepseekV3Quantized, Fp8AndInt4WeightsLoadAndTrackReference) {
  const Golden g = golden("deepseek_v3");
  for (DType wd : {DType::kFP8E4M3, DType::kI4}) {
    LoadOptions o;
    o.weight_dtype = wd;
    o.weight_group_size = 32;
    auto w = load_model(ref_dir("deepseek_v3"), o);
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    EXPECT_EQ(w->layers[1].kv_b.dtype, wd);
    EXPECT_EQ(w->layers[1].q_a.dtype, wd);
    EXPECT_EQ(w->layers[2].shared_down.dtype, wd);
    const auto got = paged_logits(*w, g, DType::kBF16, 16, 24);
    size_t agree = 0, total = 0;
    for (size_t s = 0; s < g.tokens.size(); ++s) {
      for (size_t r = 0; r < g.tokens[s].size(); ++r, ++total) {
        agree += argmax(got[s].data() + r * 1024, 1024) == argmax(g.logits[s].data() + r * 1024, 1024);
      }
    }
    std::printf("[ info ] %s weights: top-1 agreement with the reference %zu / %zu\n", dtype_name(wd).data(), agree,
                total);
    // Measured on this random-weight model: fp8 116 / 164, int4 (g32) 66 / 164 (chance: 1 / 1024).
    EXPECT_GE(agree, total * (wd == DType::kFP8E4M3 ? 0.6 : 0.3)) << dtype_name(wd);
  }
}

}  // namespace
}  // namespace densa
