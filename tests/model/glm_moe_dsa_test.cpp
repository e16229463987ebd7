// glm_moe_dsa (GLM-5: MLA + DeepSeek Sparse Attention) against the PyTorch reference
// (tests/reference/glm_moe_dsa_ref.py, float64 on BF16 weights, indexer keys FP8 per token) on
// a tiny checkpoint with index_topk 8, so prompts of 12-48 tokens cross it: golden logits on a
// paged pool (chunked prefill then decode steps, so the cached index keys are read back),
// dense-MLA equality while the context fits in index_topk, the sparse kernel against the dense
// one, and greedy continuations through the Engine with F32, BF16 and FP8 KV.
#include <gtest/gtest.h>

#include <cstring>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include <unistd.h>

#include "engine/engine.h"
#include "exec/runner.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "kernels/dsa_attention.h"
#include "kernels/mla_attention.h"
#include "kv/page_pool.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "test_util.h"
#include "tools/model_files/quantize.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

fs::path ref_dir() { return fs::path(DENSA_SOURCE_DIR) / "tests/data/reference/glm_moe_dsa"; }

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

// BF16 matrices on fp32 activations: the golden logits' arithmetic (AMX rounds x to bf16).
ModelWeights load_ok() {
  Result<ModelWeights> r = load_model(ref_dir(), LoadOptions{.bf16_f32_activations = true});
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
  for (const Golden& g : golden()) {
    for (size_t chunk : {size_t{64}, size_t{5}}) {
      const std::vector<float> got = paged_logits(model(), g.tokens, g.prompt.size(), DType::kF32, 4, chunk);
      ASSERT_EQ(got.size(), g.logits.size());
      EXPECT_LT(max_abs_diff(got, g.logits), 1e-3) << "prompt of " << g.prompt.size() << ", chunk " << chunk;
    }
  }
}

// BF16 and FP8 KV (latent rows rounded; the indexer keys are FP8 either way) against the
// fp32 golden, every position of every prompt teacher-forced, prompts in chunks of 5 across
// the index_topk boundary. The bounds follow the other MLA family (deepseek_v3_test.cpp): a
// rounded latent can flip a near-tie router or indexer choice, which moves that position's
// logits by several units, so a share of positions may exceed the per-position bound.
// Measured on these weights: BF16 1 of 112 positions above 0.15 (max 3.1), top-1 112 of 112; FP8
// (dynamic per-token scales) 18 of 112 above 1.0 (max 8.2), top-1 96 of 112.
struct KvBound {
  DType kv;
  double max_abs;       // per-position bound on max |logit - golden|
  double max_frac_over; // share of positions allowed above it
  double min_top1;      // share of positions whose argmax equals the golden one
};

class GlmMoeDsaKv : public ::testing::TestWithParam<KvBound> {};

TEST_P(GlmMoeDsaKv, LogitsNearTheGolden) {
  const KvBound& b = GetParam();
  size_t over = 0, agree = 0, total = 0;
  double worst = 0;
  for (const Golden& g : golden()) {
    const std::vector<float> got = paged_logits(model(), g.tokens, g.prompt.size(), b.kv, 4, 5);
    ASSERT_EQ(got.size(), g.logits.size());
    const size_t V = 1024;
    for (size_t r = 0; r < g.tokens.size(); ++r, ++total) {
      double d = 0;
      for (size_t i = 0; i < V; ++i) d = std::max(d, std::fabs(double(got[r * V + i]) - g.logits[r * V + i]));
      worst = std::max(worst, d);
      over += d > b.max_abs;
      const auto a = std::max_element(got.begin() + r * V, got.begin() + (r + 1) * V) - (got.begin() + r * V);
      const auto e = std::max_element(g.logits.begin() + r * V, g.logits.begin() + (r + 1) * V) - (g.logits.begin() + r * V);
      agree += a == e;
    }
  }
  std::printf("[ info ] glm_moe_dsa %s KV: max |dlogit| %.3g, %zu of %zu positions above %.2g, top-1 agrees at %zu\n",
              dtype_name(b.kv).data(), worst, over, total, b.max_abs, agree);
  EXPECT_LE(over, b.max_frac_over * total);
  EXPECT_GE(agree, b.min_top1 * total);
}

INSTANTIATE_TEST_SUITE_P(Kv, GlmMoeDsaKv,
                         ::testing::Values(KvBound{DType::kBF16, 0.15, 0.1, 0.97}, KvBound{DType::kFP8E4M3, 1.0, 0.5, 0.75}),
                         [](const auto& info) { return std::string(dtype_name(info.param.kv)); });

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

// One layer of latent rows (32 + 8) with DSA index keys of 16, for the kernel tests.
KvLayout one_layer_dsa_layout(DType dtype, int page_size) {
  KvLayout l;
  l.num_layers = 1;
  l.page_size = page_size;
  l.dtype = dtype;
  l.latent_dim = 40;
  l.index_dim = 16;
  return l;
}

// The sparse kernel over every position equals the dense kernel up to summation order, and
// over a subset equals dense attention on a cache holding only that subset.
TEST(GlmMoeDsa, SparseKernelAgainstDenseKernel) {
  const KvLayout l = one_layer_dsa_layout(DType::kF32, 4);
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
  const KvLayout l = one_layer_dsa_layout(DType::kBF16, 4);
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

// A decode query over a long context: the scoring split over a pool of threads gives the same
// bits as one thread, and the selection (one query, fewer queries than threads: the split path)
// is the same.
TEST(GlmMoeDsa, ScoresSplitOverThePoolAreTheSameBits) {
  const KvLayout l = one_layer_dsa_layout(DType::kBF16, 16);
  const int T = 5000, Hi = 4, topk = 64;
  const int num_pages = (T + l.page_size - 1) / l.page_size;
  Result<PagePool> made = PagePool::create(l, l.page_bytes() * num_pages);
  ASSERT_TRUE(made.is_ok());
  PagePool p = std::move(made).value();
  std::vector<int32_t> pages;
  for (int i = 0; i < num_pages; ++i) pages.push_back(p.allocate()->value);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(3));
  const std::vector<int32_t> offsets = {0, num_pages};
  KvView kv{l, p.base(), pages, offsets, nullptr};
  const std::vector<float> keys = testing::normal_floats(T * 16, 21);
  std::vector<int32_t> seq(T, 0), pos(T);
  std::iota(pos.begin(), pos.end(), 0);
  dsa_index_store(kv, 0, keys.data(), seq, pos);
  const std::vector<float> q = testing::normal_floats(Hi * 16, 22);
  const std::vector<float> wts = {0.7f, -0.3f, 0.2f, 0.5f};
  ThreadPool two(2);
  std::vector<float> alone(T), split(T);
  dsa_index_scores(kv, 0, q.data(), wts.data(), Hi, 0.25f, 0, T - 1, alone.data());
  dsa_index_scores(kv, 0, q.data(), wts.data(), Hi, 0.25f, 0, T - 1, split.data(), &two);
  EXPECT_EQ(std::memcmp(alone.data(), split.data(), alone.size() * sizeof(float)), 0);
  const std::vector<int32_t> last_seq = {0}, last_pos = {T - 1};
  std::vector<int32_t> sel_alone(topk), sel_split(topk), n_alone(1), n_split(1);
  dsa_select_topk(kv, 0, q.data(), wts.data(), Hi, 0.25f, topk, last_seq, last_pos, sel_alone.data(), n_alone.data(),
                  nullptr);
  dsa_select_topk(kv, 0, q.data(), wts.data(), Hi, 0.25f, topk, last_seq, last_pos, sel_split.data(), n_split.data(),
                  &two);
  EXPECT_EQ(sel_alone, sel_split);
  EXPECT_EQ(n_split[0], topk);
}

struct EngineRun {
  std::vector<std::vector<TokenId>> tokens;  // per submission
  std::vector<int32_t> cached;               // prompt tokens each submission took from the prefix cache
};

// Greedy continuations through the Engine (4-token pages, 5-token prefill chunks, KV digests
// checked every batch, the page and radix-cache audit after every step): `rounds` times over
// `prompts` (max_new[i] tokens each), each round's prompts submitted at once and drained before
// the next round, so a later round's prompts can hit the pages an earlier round cached.
EngineRun run_engine(const ModelWeights& w, DType kv, bool prefix_cache, const std::vector<std::vector<TokenId>>& prompts,
                     const std::vector<int>& max_new, int rounds = 1) {
  EngineConfig ec;
  ec.kv_dtype = kv;
  ec.page_size = 4;
  ec.kv_cache_bytes = 4 << 20;
  ec.chunked_prefill_size = 5;
  ec.audit_every_step = true;
  ec.num_threads = 1;
  ec.kv_integrity = KvIntegrityPolicy{KvIntegrityMode::kDigest, 1, 1};
  ec.enable_prefix_cache = prefix_cache;
  auto engine = Engine::create(w, ec);
  CHECK(engine.is_ok()) << engine.status().to_string();
  EngineRun out;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerateRequest r;
      r.prompt = prompts[i];
      r.sampling.temperature = 0.0f;
      r.max_new_tokens = max_new[i];
      r.ignore_eos = true;
      auto s = engine.value()->submit(r);
      CHECK(s.is_ok()) << s.status().to_string();
      streams.push_back(s.value());
    }
    for (auto& stream : streams) {
      std::vector<TokenId> got;
      int32_t cached = 0;
      FinishReason finish = FinishReason::kNone;
      while (finish == FinishReason::kNone) {
        std::optional<TokenEvent> e = stream->next(std::chrono::milliseconds(60000));
        CHECK(e.has_value()) << "request timed out";
        CHECK(e->error.is_ok()) << e->error.to_string();
        if (e->token) got.push_back(*e->token);
        cached = std::max(cached, e->num_cached_tokens);
        finish = e->finish;
      }
      out.tokens.push_back(std::move(got));
      out.cached.push_back(cached);
    }
  }
  const Status audit = engine.value()->audit();
  CHECK(audit.is_ok()) << audit.to_string();
  CHECK(engine.value()->stats().kv_pages_used == 0);
  engine.value()->shutdown();
  return out;
}

void engine_greedy(const ModelWeights& w, DType kv, const std::vector<Golden>& gs,
                   std::vector<std::vector<TokenId>>& got) {
  std::vector<std::vector<TokenId>> prompts;
  std::vector<int> max_new;
  for (const Golden& g : gs) {
    prompts.push_back(g.prompt);
    max_new.push_back(static_cast<int>(g.greedy.size()));
  }
  got = run_engine(w, kv, /*prefix_cache=*/true, prompts, max_new).tokens;
}

// All prompts at once through the Engine (paged pool of 4-token pages, chunked prefill mixed
// with decodes, KV digests checked every batch, audit every step, prefix cache on; hits are
// the next test's). F32 KV gives the golden
// continuations; BF16 and FP8 latent KV may part from them only at a step whose golden
// top-1/top-2 margin is small (0.3 and 1.0 logits), as rounding the cache moves logits.
TEST(GlmMoeDsa, EngineGreedyMatchesReference) {
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

// The prefix cache on a DSA model: the cached pages hold the latent rows and the index keys (one
// page, two row types), so a prompt whose full pages come from the cache must score and attend
// exactly as if it had computed them. Prompts: the golden ones (12-40 tokens, past index_topk 8
// within a 5-token chunk), a 6-token one whose whole context stays within index_topk (dense MLA),
// and prefixes / extensions of the 40-token one that share its pages; each list sent twice, the
// second time from the cache. With BF16, FP8 and F32 KV every continuation equals the one with the
// prefix cache off, the golden prompts follow their golden greedy (as the test above), and the
// second round took every full page but the last token's from the cache.
TEST(GlmMoeDsa, PrefixCacheHitsEqualRecomputation) {
  const std::vector<Golden> gs = golden();
  std::vector<std::vector<TokenId>> prompts;
  std::vector<int> max_new;
  for (const Golden& g : gs) {
    prompts.push_back(g.prompt);
    max_new.push_back(static_cast<int>(g.greedy.size()));
  }
  const std::vector<TokenId>& longest = gs.back().prompt;  // 40 tokens
  ASSERT_EQ(longest.size(), 40u);
  prompts.push_back({longest.begin(), longest.begin() + 6});  // context <= 6 + 2 = index_topk
  max_new.push_back(2);
  prompts.push_back({longest.begin(), longest.begin() + 21});  // shares 5 pages with the longest
  max_new.push_back(6);
  std::vector<TokenId> longer = longest;
  longer.insert(longer.end(), gs.back().greedy.begin(), gs.back().greedy.end());
  longer.push_back(7);
  prompts.push_back(longer);  // the longest prompt's continuation cached, then one new token
  max_new.push_back(4);
  const size_t n = prompts.size();
  for (auto [kv, margin] : {std::pair{DType::kBF16, 0.3}, std::pair{DType::kFP8E4M3, 1.0}, std::pair{DType::kF32, 0.0}}) {
    const EngineRun off = run_engine(model(), kv, false, prompts, max_new);
    const EngineRun on = run_engine(model(), kv, true, prompts, max_new, 2);
    ASSERT_EQ(on.tokens.size(), 2 * n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(on.tokens[i], off.tokens[i]) << dtype_name(kv) << " prompt " << i << " round 0";
      EXPECT_EQ(on.tokens[n + i], off.tokens[i]) << dtype_name(kv) << " prompt " << i << " from the cache";
      // Every full page but the last token's from the cache; the extension of the longest prompt
      // ran beside it in round 0, so the trie kept the pages of whichever inserted first (the other
      // copy stops its insert) and the hit covers at least their shared 40 tokens.
      const int32_t all = static_cast<int32_t>((prompts[i].size() - 1) / 4 * 4);
      if (i + 1 < n) {
        EXPECT_EQ(on.cached[n + i], all) << dtype_name(kv) << " prompt " << i;
      } else {
        EXPECT_GE(on.cached[n + i], 40) << dtype_name(kv);
        EXPECT_LE(on.cached[n + i], all) << dtype_name(kv);
      }
      EXPECT_EQ(off.cached[i], 0);
    }
    for (size_t i = 0; i < gs.size(); ++i) {
      for (size_t k = 0; k < gs[i].greedy.size(); ++k) {
        if (off.tokens[i][k] == gs[i].greedy[k]) continue;
        const float* row = gs[i].logits.data() + (gs[i].prompt.size() - 1 + k) * 1024;
        std::vector<float> top(row, row + 1024);
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
        EXPECT_LT(top[0] - top[1], margin) << dtype_name(kv) << " prompt " << i << " parts at step " << k;
        break;
      }
    }
  }
  // The short prompt is dense MLA: the same tokens as the model with index_topk past every context.
  ModelWeights dense = load_ok();
  dense.config.dsa.index_topk = 1 << 20;
  const EngineRun d = run_engine(dense, DType::kF32, true, {prompts[gs.size()]}, {2});
  const EngineRun s = run_engine(model(), DType::kF32, true, {prompts[gs.size()]}, {2});
  EXPECT_EQ(d.tokens[0], s.tokens[0]);
}

// GGUF under llama.cpp's glm-dsa: deepseek2's MLA keys plus attention.indexer.{head_count,
// key_length, top_k} and the indexer tensors blk.N.indexer.{attn_q_b, attn_k, k_norm, proj}. A
// BF16 file of the BF16 checkpoint loads to the same weights: logits bit-identical to the Hugging
// Face load (chunked prefill across index_topk, then decode steps), so within the golden bound
// and greedy equal to the golden greedy.
TEST(GlmMoeDsa, GgufGlmDsaEqualsTheHfLoad) {
  const fs::path out = fs::temp_directory_path() / ("densa_glm_moe_dsa_" + std::to_string(::getpid()) + ".gguf");
  Result<QuantizeReport> rep = quantize_checkpoint(QuantizeOptions{ref_dir(), out, "bf16", 128, ""});
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  Result<GgufFile> f = GgufFile::open(out);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->get_string("general.architecture"), "glm-dsa");
  EXPECT_EQ(f->get_int("glm-dsa.attention.indexer.head_count"), 4);
  EXPECT_EQ(f->get_int("glm-dsa.attention.indexer.key_length"), 16);
  EXPECT_EQ(f->get_int("glm-dsa.attention.indexer.top_k"), 8);
  EXPECT_EQ(f->get_int("glm-dsa.attention.kv_lora_rank"), 32);
  for (const char* t : {"indexer.attn_q_b.weight", "indexer.attn_k.weight", "indexer.k_norm.weight",
                        "indexer.k_norm.bias", "indexer.proj.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight"}) {
    EXPECT_TRUE(f->has_tensor(std::string("blk.1.") + t)) << t;
  }
  Result<ModelWeights> loaded = load_model(out, LoadOptions{.bf16_f32_activations = true});
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const ModelWeights& w = *loaded;
  EXPECT_EQ(w.format, "gguf");
  EXPECT_EQ(w.config.architecture, "GlmMoeDsaForCausalLM");
  EXPECT_STREQ(w.config.attention_kind(), "MLA+DSA");
  EXPECT_EQ(w.config.dsa.index_topk, 8);
  EXPECT_EQ(w.config.dsa.index_n_heads, 4);
  EXPECT_EQ(w.config.dsa.index_head_dim, 16);
  EXPECT_EQ(w.config.first_k_dense_replace, model().config.first_k_dense_replace);
  EXPECT_EQ(w.num_params(), model().num_params());
  EXPECT_EQ(w.layers[1].idx_k_norm_b, model().layers[1].idx_k_norm_b);
  for (const Golden& g : golden()) {
    const std::vector<float> got = paged_logits(w, g.tokens, g.prompt.size(), DType::kF32, 4, 5);
    EXPECT_TRUE(got == paged_logits(model(), g.tokens, g.prompt.size(), DType::kF32, 4, 5))
        << "prompt of " << g.prompt.size() << ": GGUF and HF logits differ";
    EXPECT_LT(max_abs_diff(got, g.logits), 1e-3) << "prompt of " << g.prompt.size();
  }
  std::vector<std::vector<TokenId>> got;
  const std::vector<Golden> gs = golden();
  engine_greedy(w, DType::kF32, gs, got);
  for (size_t i = 0; i < gs.size(); ++i) EXPECT_EQ(got[i], gs[i].greedy) << "prompt " << i;
  // A file without the indexer metadata is refused by name.
  std::vector<std::pair<std::string, GgufValue>> md;
  for (const auto& [k, v] : f->metadata()) {
    if (k != "glm-dsa.attention.indexer.top_k") md.emplace_back(k, v);
  }
  std::vector<GgufOutTensor> tensors;
  for (const GgufTensorInfo& info : f->tensor_infos()) {
    auto t = f->tensor(info.name);
    ASSERT_TRUE(t.is_ok());
    tensors.push_back({info.name, info.ggml_type, info.ne, {t->data, t->data + t->nbytes}});
  }
  const fs::path bad = fs::path(out).replace_extension(".no_topk.gguf");
  ASSERT_TRUE(write_gguf(bad, md, tensors).is_ok());
  Result<ModelWeights> r = load_model(bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("glm-dsa.attention.indexer.top_k"), std::string::npos) << r.status().message();
  fs::remove(out);
  fs::remove(bad);
}

}  // namespace
}  // namespace densa
