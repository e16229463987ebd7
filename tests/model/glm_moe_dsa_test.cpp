// glm_moe_dsa (GLM-5: MLA + DeepSeek Sparse Attention) against the PyTorch reference
// (tests/reference/glm_moe_dsa_ref.py, float64 on BF16 weights, indexer keys FP8 per token) on
// a tiny checkpoint with index_topk 8, so prompts of 12-48 tokens cross it: golden logits on a
// paged pool (chunked prefill then decode steps, so the cached index keys are read back),
// dense-MLA equality while the context fits in index_topk, the sparse kernel against the dense
// one, and greedy continuations through the Engine with F32, BF16 and FP8 KV.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include "engine/engine.h"
#include "exec/runner.h"
#include "kernels/dsa_attention.h"
#include "kernels/mla_attention.h"
#include "kv/page_pool.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "test_util.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

fs::path ref_dir() { return fs::path(DENSA_SOURCE_DIR) / "tests/data/reference/glm_moe_dsa"; }

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

ModelWeights load_ok() {
  Result<ModelWeights> r = load_model(ref_dir());
  CHECK(r.is_ok()) << r.status().to_string();
  return std::move(r).value();
}

const ModelWeights& model() {
  static ModelWeights w = load_ok();
  return w;
}

struct Golden {
  std::vector<TokenId> prompt, greedy, tokens;
  std::vector<float> logits;  // [tokens.size(), vocab]
  double min_margin = 0;
};

std::vector<Golden> golden() {
  const nlohmann::json j = testing::read_json(ref_dir() / "golden.json");
  std::vector<Golden> out;
  int i = 0;
  for (const auto& p : j["prompts"]) {
    Golden g;
    g.prompt = p["prompt_ids"].get<std::vector<TokenId>>();
    g.greedy = p["greedy_ids"].get<std::vector<TokenId>>();
    g.tokens = g.prompt;
    g.tokens.insert(g.tokens.end(), g.greedy.begin(), g.greedy.end());
    g.logits = testing::read_binary<float>(ref_dir() / ("prompt" + std::to_string(i++) + ".logits.f32.bin"));
    g.min_margin = p["min_margin"].get<double>();
    out.push_back(std::move(g));
  }
  return out;
}

// Logits of every position of `tokens` (one sequence) fed `chunk` tokens per step while in
// the prompt, then one per step, on a paged pool of `page_size`-token pages taken shuffled.
std::vector<float> paged_logits(const ModelWeights& w, const std::vector<TokenId>& tokens, size_t prompt_len,
                                DType kv_dtype, int page_size, size_t chunk) {
  const KvLayout layout = kv_layout_for(w.config, page_size, kv_dtype);
  const int pages = static_cast<int>((tokens.size() + page_size - 1) / page_size);
  Result<PagePool> made = PagePool::create(layout, layout.page_bytes() * (pages + 3));
  CHECK(made.is_ok()) << made.status().to_string();
  PagePool kv_pool = std::move(made).value();
  std::vector<int32_t> ids;
  for (int p = 0; p < pages + 3; ++p) ids.push_back(kv_pool.allocate()->value);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  ids.resize(static_cast<size_t>(pages));
  KvView kv;
  kv.layout = layout;
  kv.pool = kv_pool.base();
  kv.block_table = ids;
  const std::vector<int32_t> offsets = {0, pages};
  kv.block_offsets = offsets;
  ForwardScratch scratch;
  const size_t V = static_cast<size_t>(w.config.vocab_size);
  std::vector<float> out;
  for (size_t done = 0; done < tokens.size();) {
    const size_t n = done < prompt_len ? std::min(chunk, prompt_len - done) : 1;
    std::vector<int32_t> positions, seq, rows;
    for (size_t k = 0; k < n; ++k) {
      positions.push_back(static_cast<int32_t>(done + k));
      seq.push_back(0);
      rows.push_back(static_cast<int32_t>(k));
    }
    std::vector<float> logits(n * V);
    forward(w, ForwardBatch{std::span<const TokenId>(tokens).subspan(done, n), positions, seq, rows}, kv, scratch,
            &pool(), logits.data());
    out.insert(out.end(), logits.begin(), logits.end());
    done += n;
  }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b, size_t from_row = 0,
                    size_t to_row = SIZE_MAX) {
  const size_t V = 1024;
  double m = 0;
  for (size_t i = from_row * V; i < std::min(a.size(), to_row * V); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

TEST(GlmMoeDsa, ConfigAndLayout) {
  const ModelConfig& c = model().config;
  EXPECT_EQ(c.architecture, "GlmMoeDsaForCausalLM");
  EXPECT_STREQ(c.attention_kind(), "MLA+DSA");
  EXPECT_EQ(c.dsa.index_topk, 8);
  EXPECT_EQ(c.dsa.index_n_heads, 4);
  EXPECT_EQ(c.dsa.index_head_dim, 16);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  ASSERT_FALSE(model().layers[0].idx_wq_b.empty());
  EXPECT_EQ(model().layers[1].idx_k_norm_b.size(), 16u);
  const KvLayout l = kv_layout_for(c, 4, DType::kBF16);
  EXPECT_EQ(l.index_dim, 16);
  // Per page: latent rows (32 + 8 values, bf16), then per (layer, slot) 16 FP8 codes and one
  // f32 scale.
  EXPECT_EQ(l.page_bytes(), 2 * 4 * (40 * 2) + 2 * 4 * (16 + 4));
  EXPECT_EQ(l.index_key_offset(1, 3), 2 * 4 * 80 + (1 * 4 + 3) * 16);
  EXPECT_EQ(l.index_scale_offset(0, 1), 2 * 4 * 80 + 2 * 4 * 16 + 1 * 4);
}

TEST(GlmMoeDsa, GoldenLogitsF32Kv) {
  testing::ExactBf16Matmul exact;
  for (const Golden& g : golden()) {
    for (size_t chunk : {size_t{64}, size_t{5}}) {
      const std::vector<float> got = paged_logits(model(), g.tokens, g.prompt.size(), DType::kF32, 4, chunk);
      ASSERT_EQ(got.size(), g.logits.size());
      EXPECT_LT(max_abs_diff(got, g.logits), 1e-3) << "prompt of " << g.prompt.size() << ", chunk " << chunk;
    }
  }
}

// While a query's context fits in index_topk it attends to everything: the result is dense
// MLA's bit for bit (the same model with an index_topk past every context); beyond it the
// indexer's choice changes the logits.
TEST(GlmMoeDsa, ShortContextEqualsDenseMla) {
  ModelWeights dense = load_ok();
  dense.config.dsa.index_topk = 1 << 20;
  const std::vector<Golden> gs = golden();
  const Golden& g = gs.back();  // 40 + 8 tokens
  const std::vector<float> sparse_logits = paged_logits(model(), g.tokens, g.prompt.size(), DType::kF32, 4, 5);
  const std::vector<float> dense_logits = paged_logits(dense, g.tokens, g.prompt.size(), DType::kF32, 4, 5);
  const size_t V = 1024;
  EXPECT_TRUE(std::equal(sparse_logits.begin(), sparse_logits.begin() + 8 * V, dense_logits.begin()));
  EXPECT_GT(max_abs_diff(sparse_logits, dense_logits, 8), 1e-2);
  // And the dense model is not the reference past index_topk, the sparse one is.
  EXPECT_GT(max_abs_diff(dense_logits, g.logits, 8), 1e-2);
  EXPECT_LT(max_abs_diff(sparse_logits, g.logits), 1e-3);
}

// The sparse kernel over every position equals the dense kernel up to summation order, and
// over a subset equals dense attention on a cache holding only that subset.
TEST(GlmMoeDsa, SparseKernelAgainstDenseKernel) {
  KvLayout l;
  l.num_layers = 1;
  l.page_size = 4;
  l.dtype = DType::kF32;
  l.latent_dim = 40;
  l.index_dim = 16;
  const int C = 32, H = 3, T = 11;
  Result<PagePool> made = PagePool::create(l, l.page_bytes() * 6);
  ASSERT_TRUE(made.is_ok());
  PagePool p = std::move(made).value();
  std::vector<int32_t> pages = {p.allocate()->value, p.allocate()->value, p.allocate()->value};
  const std::vector<int32_t> offsets = {0, 3};
  KvView kv{l, p.base(), pages, offsets, nullptr};
  const std::vector<float> rows = testing::normal_floats(T * 40, 3);
  std::vector<int32_t> seq(T, 0), pos(T);
  std::iota(pos.begin(), pos.end(), 0);
  mla_kv_store(kv, 0, rows.data(), C, seq, pos);
  const std::vector<float> q = testing::normal_floats(H * 40, 4);
  const std::vector<int32_t> q_seq = {0}, q_pos = {T - 1};
  std::vector<float> dense(H * C), sparse(H * C);
  paged_mla_attention(kv, 0, q.data(), H, C, 0.2f, q_seq, q_pos, dense.data(), nullptr);
  std::vector<int32_t> all(T);
  std::iota(all.begin(), all.end(), 0);
  const int32_t count = T;
  paged_mla_attention_sparse(kv, 0, q.data(), H, C, 0.2f, q_seq, all.data(), &count, T, sparse.data(), nullptr);
  for (int i = 0; i < H * C; ++i) EXPECT_NEAR(sparse[i], dense[i], 1e-5) << i;
  // Subset {1, 4, 9}: the same as a fresh cache holding just those rows at positions 0..2.
  const std::vector<int32_t> subset = {1, 4, 9};
  const int32_t three = 3;
  paged_mla_attention_sparse(kv, 0, q.data(), H, C, 0.2f, q_seq, subset.data(), &three, 3, sparse.data(), nullptr);
  Result<PagePool> made2 = PagePool::create(l, l.page_bytes() * 2);
  ASSERT_TRUE(made2.is_ok());
  PagePool p2 = std::move(made2).value();
  std::vector<int32_t> pages2 = {p2.allocate()->value};
  const std::vector<int32_t> offsets2 = {0, 1};
  KvView kv2{l, p2.base(), pages2, offsets2, nullptr};
  std::vector<float> picked;
  for (int32_t s : subset) picked.insert(picked.end(), rows.begin() + s * 40, rows.begin() + (s + 1) * 40);
  const std::vector<int32_t> seq3 = {0, 0, 0}, pos3 = {0, 1, 2}, last = {2};
  mla_kv_store(kv2, 0, picked.data(), C, seq3, pos3);
  paged_mla_attention(kv2, 0, q.data(), H, C, 0.2f, q_seq, last, dense.data(), nullptr);
  for (int i = 0; i < H * C; ++i) EXPECT_NEAR(sparse[i], dense[i], 1e-5) << i;
}

// The selection: top-k of the indexer scores, ties to the lower position, ascending.
TEST(GlmMoeDsa, SelectionIsTheTopScores) {
  KvLayout l;
  l.num_layers = 1;
  l.page_size = 4;
  l.dtype = DType::kBF16;
  l.latent_dim = 40;
  l.index_dim = 16;
  Result<PagePool> made = PagePool::create(l, l.page_bytes() * 4);
  ASSERT_TRUE(made.is_ok());
  PagePool p = std::move(made).value();
  std::vector<int32_t> pages = {p.allocate()->value, p.allocate()->value, p.allocate()->value, p.allocate()->value};
  const std::vector<int32_t> offsets = {0, 4};
  KvView kv{l, p.base(), pages, offsets, nullptr};
  const int T = 14, Hi = 2, topk = 5;
  const std::vector<float> keys = testing::normal_floats(T * 16, 11);
  std::vector<int32_t> seq(T, 0), pos(T);
  std::iota(pos.begin(), pos.end(), 0);
  dsa_index_store(kv, 0, keys.data(), seq, pos);
  const std::vector<float> q = testing::normal_floats(T * Hi * 16, 12);
  const std::vector<float> wts = {0.7f, -0.3f};
  std::vector<float> w_all;
  for (int t = 0; t < T; ++t) w_all.insert(w_all.end(), wts.begin(), wts.end());
  std::vector<int32_t> sel(T * topk), counts(T);
  dsa_select_topk(kv, 0, q.data(), w_all.data(), Hi, 0.25f, topk, seq, pos, sel.data(), counts.data(), &pool());
  for (int t = 0; t < T; ++t) {
    std::vector<float> s(t + 1);
    dsa_index_scores(kv, 0, q.data() + t * Hi * 16, wts.data(), Hi, 0.25f, 0, t, s.data());
    if (t + 1 <= topk) {
      EXPECT_EQ(counts[t], t + 1);
      continue;
    }
    ASSERT_EQ(counts[t], topk);
    std::vector<float> sorted = s;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    for (int j = 0; j < topk; ++j) {
      EXPECT_GE(s[sel[t * topk + j]], sorted[topk - 1]) << "t " << t;
      if (j > 0) {
        EXPECT_LT(sel[t * topk + j - 1], sel[t * topk + j]);
      }
    }
  }
}

void engine_greedy(const ModelWeights& w, DType kv, const std::vector<Golden>& gs,
                   std::vector<std::vector<TokenId>>& got) {
  EngineConfig ec;
  ec.kv_dtype = kv;
  ec.page_size = 4;
  ec.kv_cache_bytes = 4 << 20;
  ec.chunked_prefill_size = 5;
  ec.audit_every_step = true;
  ec.num_threads = 1;
  ec.kv_integrity = KvIntegrityPolicy{KvIntegrityMode::kDigest, 1, 1};
  // With the prefix cache on, the radix-cache audit fails after the first step for MLA
  // models (deepseek_v3 as well as this one, a pre-existing engine issue), so it is off here.
  ec.enable_prefix_cache = false;
  auto engine = Engine::create(w, ec);
  CHECK(engine.is_ok()) << engine.status().to_string();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Golden& g : gs) {
    GenerateRequest r;
    r.prompt = g.prompt;
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = static_cast<int>(g.greedy.size());
    r.ignore_eos = true;
    auto s = engine.value()->submit(r);
    CHECK(s.is_ok()) << s.status().to_string();
    streams.push_back(s.value());
  }
  got.assign(gs.size(), {});
  for (size_t i = 0; i < gs.size(); ++i) {
    FinishReason finish = FinishReason::kNone;
    while (finish == FinishReason::kNone) {
      std::optional<TokenEvent> e = streams[i]->next(std::chrono::milliseconds(60000));
      CHECK(e.has_value()) << "request timed out";
      CHECK(e->error.is_ok()) << e->error.to_string();
      if (e->token) got[i].push_back(*e->token);
      finish = e->finish;
    }
  }
  CHECK(engine.value()->audit().is_ok());
  CHECK(engine.value()->stats().kv_pages_used == 0);
  engine.value()->shutdown();
}

// All prompts at once through the Engine (paged pool of 4-token pages, chunked prefill mixed
// with decodes, KV digests checked every batch, audit every step; no prefix cache). F32 KV gives the golden
// continuations; BF16 and FP8 latent KV may part from them only at a step whose golden
// top-1/top-2 margin is small (0.3 and 1.0 logits), as rounding the cache moves logits.
TEST(GlmMoeDsa, EngineGreedyMatchesReference) {
  testing::ExactBf16Matmul exact;
  const std::vector<Golden> gs = golden();
  for (auto [kv, margin] : {std::pair{DType::kBF16, 0.3}, std::pair{DType::kFP8E4M3, 1.0}, std::pair{DType::kF32, 0.0}}) {
    std::vector<std::vector<TokenId>> got;
    engine_greedy(model(), kv, gs, got);
    for (size_t i = 0; i < gs.size(); ++i) {
      ASSERT_EQ(got[i].size(), gs[i].greedy.size()) << dtype_name(kv);
      for (size_t k = 0; k < got[i].size(); ++k) {
        if (got[i][k] == gs[i].greedy[k]) continue;
        const float* row = gs[i].logits.data() + (gs[i].prompt.size() - 1 + k) * 1024;
        std::vector<float> top(row, row + 1024);
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
        EXPECT_LT(top[0] - top[1], margin) << dtype_name(kv) << " prompt " << i << " parts at step " << k;
        break;
      }
    }
  }
}

}  // namespace
}  // namespace densa
