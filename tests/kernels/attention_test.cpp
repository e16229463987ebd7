// Paged attention against the naive contiguous oracle, for several page sizes, shuffled
// page placement, GQA groupings, every storage dtype (F32, BF16, FP8 e4m3 with static and
// dynamic scales) and every path this CPU has (scalar, AVX-512, AMX tiles).
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "kernels/internal/attention_isa.h"
#include "kernels/reference/attention_ref.h"
#include "quant/fp8.h"

namespace densa {
namespace {

using attention_internal::AttnPath;
using attention_internal::paged_attention_with_path;
using attention_internal::amx_attention_set_kept_limit;
constexpr int kAttnTileForTest = attention_internal::kAttnTile;

struct Case {
  int page_size;
  int num_heads;
  int num_kv_heads;
  int head_dim;
  DType dtype;
  KvScaleMode scale_mode = KvScaleMode::kNone;
};

std::vector<AttnPath> paths() { return attention_internal::attention_paths_available(); }

// A pool with the pages of all sequences scattered in a random order, plus static scales.
struct TestCache {
  KvLayout layout;
  std::unique_ptr<uint8_t[]> bytes;
  std::vector<int32_t> table, offsets = {0};
  std::vector<float> static_scales;  // [layer][k|v][kv_head]

  TestCache(const KvLayout& l, const std::vector<int>& lens, std::mt19937& rng) : layout(l) {
    int total_pages = 0;
    for (int len : lens) total_pages += (len + l.page_size - 1) / l.page_size;
    std::vector<int32_t> perm(total_pages);
    for (int i = 0; i < total_pages; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    int next = 0;
    for (int len : lens) {
      for (int p = 0; p < (len + l.page_size - 1) / l.page_size; ++p) table.push_back(perm[next++]);
      offsets.push_back(static_cast<int32_t>(table.size()));
    }
    bytes = std::make_unique<uint8_t[]>(l.page_bytes() * total_pages);
    // Static scales that put |x| <= ~3.5 in range (N(0,1) data: a few values saturate).
    for (int i = 0; i < l.num_layers * 2 * l.num_kv_heads; ++i)
      static_scales.push_back((3.0f + 0.1f * static_cast<float>(i % 7)) / kFp8E4M3Max);
  }
  KvView view() const {
    return KvView{layout, bytes.get(), table, offsets,
                  layout.scale_mode == KvScaleMode::kStatic ? static_scales.data() : nullptr};
  }
};

// What the cache holds for a row after kv_store, as fp32.
void stored_values(const Case& c, const float* scales, int layer, int which, int head,
                   const float* row, float* out) {
  if (c.dtype == DType::kF32) {
    std::copy_n(row, c.head_dim, out);
  } else if (c.dtype == DType::kBF16) {
    for (int d = 0; d < c.head_dim; ++d) out[d] = bf16_to_f32(f32_to_bf16(row[d]));
  } else {
    const float s = c.scale_mode == KvScaleMode::kStatic
                        ? scales[(layer * 2 + which) * c.num_kv_heads + head]
                        : ref::kv_fp8_dynamic_scale(row, c.head_dim);
    ref::kv_fp8_round_trip(row, c.head_dim, s, out);
  }
}

// What the AMX path adds to the fp32 error (kernels/attention/attention_amx.cpp): q x scale and each softmax
// weight are kept as two bf16 parts, together within 2^-16 of the value. A score then moves by at
// most D = 2^-16 S (S = max over positions of scale * sum_d |q_d k_d|, plus fp32 sums), the
// normalized weights by a factor within e^(+-2D), and the weighted sum by at most
// (e^(2D) - 1 + 2^-16 e^(2D)) max_t |v_t[d]| (a convex combination); the bound below rounds that
// up to (2^-14 S + 2^-14) max_t |v_t[d]|. Other paths and layouts the AMX path does not take: 0.
// q_token: the token's q (all heads); one bound per element of its output.
std::vector<double> amx_bounds(AttnPath path, const KvLayout& L, const float* q_token, float scale,
                               const std::vector<float>& k_held, const std::vector<float>& v_held, int pos,
                               int num_heads) {
  const int hd = L.head_dim, group = num_heads / L.num_kv_heads, kv_dim = L.num_kv_heads * hd;
  std::vector<double> bound(static_cast<size_t>(num_heads) * hd, 0.0);
  if (path != AttnPath::kAmx || !attention_internal::amx_attention_supports(L)) return bound;
  std::vector<double> v_max(kv_dim, 0.0);
  for (int t = 0; t <= pos; ++t)
    for (int i = 0; i < kv_dim; ++i)
      v_max[i] = std::max(v_max[i], std::fabs(double(v_held[static_cast<size_t>(t) * kv_dim + i])));
  for (int h = 0; h < num_heads; ++h) {
    const int kvh = h / group;
    double s_max = 0;
    for (int t = 0; t <= pos; ++t) {
      const float* k = &k_held[static_cast<size_t>(t) * kv_dim + kvh * hd];
      double s = 0;
      for (int j = 0; j < hd; ++j) s += std::fabs(double(q_token[h * hd + j]) * scale * k[j]);
      s_max = std::max(s_max, s);
    }
    for (int d = 0; d < hd; ++d) bound[h * hd + d] = (std::ldexp(s_max, -14) + std::ldexp(1.0, -14)) * v_max[kvh * hd + d];
  }
  return bound;
}

// Every path against the oracle for sequences of the given lengths: queries at the first,
// middle and last position of each, plus a prefill-like chunk of 33 consecutive positions from
// `run_from` of the last sequence (runs of 16, 16 and 1 that share decoded tiles); and each
// query alone gives the bits of the batch.
void check_against_reference(const Case& c, const std::vector<int>& lens, int run_from) {
  const int num_seqs = static_cast<int>(lens.size()), layers = 2, layer = 1;
  std::mt19937 rng(7);
  TestCache cache(KvLayout{layers, c.num_kv_heads, c.head_dim, c.page_size, c.dtype, c.scale_mode},
                  lens, rng);
  const KvView kv = cache.view();
  const int kv_dim = c.num_kv_heads * c.head_dim, q_dim = c.num_heads * c.head_dim;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // Original values (ks, vs) and what the cache holds (ks_held, vs_held), contiguous.
  std::vector<std::vector<float>> ks(num_seqs), vs(num_seqs), ks_held(num_seqs), vs_held(num_seqs);
  for (int s = 0; s < num_seqs; ++s) {
    ks[s].resize(lens[s] * kv_dim);
    vs[s].resize(lens[s] * kv_dim);
    for (auto& x : ks[s]) x = nd(rng);
    for (auto& x : vs[s]) x = nd(rng);
    ks[s][5 % ks[s].size()] = 0.0f;
    ks_held[s].resize(ks[s].size());
    vs_held[s].resize(vs[s].size());
    for (int p = 0; p < lens[s]; ++p) {
      for (int h = 0; h < c.num_kv_heads; ++h) {
        const int64_t o = static_cast<int64_t>(p) * kv_dim + h * c.head_dim;
        stored_values(c, cache.static_scales.data(), layer, 0, h, &ks[s][o], &ks_held[s][o]);
        stored_values(c, cache.static_scales.data(), layer, 1, h, &vs[s][o], &vs_held[s][o]);
      }
    }
    std::vector<int32_t> seq(lens[s], s), pos(lens[s]);
    for (int i = 0; i < lens[s]; ++i) pos[i] = i;
    kv_store(kv, layer, ks[s].data(), vs[s].data(), seq, pos);
  }
  // FP8: the stored codes and dynamic scales are exactly the reference encoding.
  if (c.dtype == DType::kFP8E4M3) {
    const KvLayout& L = kv.layout;
    for (int s = 0; s < num_seqs; ++s) {
      for (int p = 0; p < lens[s]; ++p) {
        const uint8_t* page = kv.page_ptr(kv.page_of(s, p));
        for (int h = 0; h < c.num_kv_heads; ++h) {
          const float* row = &ks[s][static_cast<int64_t>(p) * kv_dim + h * c.head_dim];
          float sc = cache.static_scales[(layer * 2) * c.num_kv_heads + h];
          if (c.scale_mode == KvScaleMode::kDynamic) {
            std::memcpy(&sc, page + L.scale_offset(layer, 0, h, p % c.page_size), 4);
            ASSERT_EQ(sc, ref::kv_fp8_dynamic_scale(row, c.head_dim));
          }
          const uint8_t* codes = page + L.data_offset(layer, 0, h, p % c.page_size);
          for (int d = 0; d < c.head_dim; ++d)
            ASSERT_EQ(codes[d], sc > 0 ? fp8_e4m3_from_f32(row[d] / sc) : 0) << "seq " << s << " pos " << p;
        }
      }
    }
  }
  std::vector<int32_t> qseq, qpos;
  for (int s = 0; s < num_seqs; ++s)
    for (int p : {0, lens[s] / 2, lens[s] - 1}) { qseq.push_back(s); qpos.push_back(p); }
  const int n_spread = static_cast<int>(qseq.size());  // the storage-error bounds are for these
  for (int p = run_from; p < run_from + 33; ++p) { qseq.push_back(num_seqs - 1); qpos.push_back(p); }
  const int n = static_cast<int>(qseq.size());
  std::vector<float> q(n * q_dim), out(n * q_dim), want(q_dim), want_f32(q_dim);
  for (auto& x : q) x = nd(rng);
  ThreadPool tp(2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  for (AttnPath path : paths()) {
    SCOPED_TRACE(std::string(attention_internal::attn_path_name(path)));
    paged_attention_with_path(path, kv, layer, q.data(), c.num_heads, scale, qseq, qpos, out.data(), &tp);
    double err2 = 0, ref2 = 0, worst_f32 = 0;
    for (int i = 0; i < n; ++i) {
      // Tight: against the oracle on exactly the values the cache holds.
      ref::attention_one(q.data() + i * q_dim, ks_held[qseq[i]].data(), vs_held[qseq[i]].data(),
                         qpos[i], c.num_heads, c.num_kv_heads, c.head_dim, scale, want.data());
      const std::vector<double> bound =
          amx_bounds(path, kv.layout, q.data() + i * q_dim, scale, ks_held[qseq[i]], vs_held[qseq[i]], qpos[i], c.num_heads);
      for (int d = 0; d < q_dim; ++d) EXPECT_NEAR(out[i * q_dim + d], want[d], 2e-5 + bound[d]) << "token " << i;
      // Loose: against fp32 attention on the original values (the storage rounding error).
      if (i >= n_spread) continue;
      ref::attention_one(q.data() + i * q_dim, ks[qseq[i]].data(), vs[qseq[i]].data(), qpos[i],
                         c.num_heads, c.num_kv_heads, c.head_dim, scale, want_f32.data());
      for (int d = 0; d < q_dim; ++d) {
        const double e = out[i * q_dim + d] - want_f32[d];
        err2 += e * e;
        ref2 += double(want_f32[d]) * want_f32[d];
        worst_f32 = std::max(worst_f32, std::fabs(e));
      }
    }
    // FP8 e4m3 keeps 3 mantissa bits (relative rounding error <= 1/16 per element, ~1/50 RMS);
    // attention averages it down. Bounds: RMS error <= 3% of the output RMS, max |error|
    // <= 0.15 on N(0,1) data. BF16: 0.5% / 0.02.
    const double rel_rms = std::sqrt(err2 / ref2);
    if (c.dtype == DType::kFP8E4M3) {
      EXPECT_LE(rel_rms, 0.03);
      EXPECT_LE(worst_f32, 0.15);
    } else if (c.dtype == DType::kBF16) {
      EXPECT_LE(rel_rms, 0.005);
      EXPECT_LE(worst_f32, 0.02);
    }
    ::testing::Test::RecordProperty("rel_rms_vs_f32", std::to_string(rel_rms));
    // Batch invariance: each query alone gives bit-identical output.
    for (int i = 0; i < n; ++i) {
      std::vector<float> one(q_dim);
      paged_attention_with_path(path, kv, layer, q.data() + i * q_dim, c.num_heads, scale,
                               std::span<const int32_t>(&qseq[i], 1),
                               std::span<const int32_t>(&qpos[i], 1), one.data(), nullptr);
      for (int d = 0; d < q_dim; ++d) ASSERT_EQ(one[d], out[i * q_dim + d]);
    }
  }
}

class PagedAttention : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttention, MatchesContiguousReference) { check_against_reference(GetParam(), {1, 37, 70}, 20); }

// Contexts of 600 and 1,100 positions (the shapes above stop at 70): many prefetch distances
// and pipelined passes, a partial last pass, and a 33-token run deep in the context.
TEST(PagedAttentionLong, MatchesContiguousReference) {
  for (const Case& c : {Case{16, 16, 4, 64, DType::kBF16}, Case{7, 8, 2, 128, DType::kBF16},
                        Case{16, 8, 2, 128, DType::kFP8E4M3, KvScaleMode::kDynamic},
                        Case{33, 16, 4, 64, DType::kFP8E4M3, KvScaleMode::kDynamic}}) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " hd " + std::to_string(c.head_dim) + " page " +
                 std::to_string(c.page_size));
    check_against_reference(c, {600, 1100}, 1000);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttention,
    ::testing::Values(Case{16, 8, 4, 16, DType::kF32}, Case{1, 8, 4, 16, DType::kF32},
                      Case{7, 4, 4, 32, DType::kF32}, Case{16, 8, 1, 64, DType::kBF16},
                      Case{128, 8, 2, 16, DType::kBF16}, Case{5, 8, 4, 20, DType::kBF16},
                      Case{16, 8, 4, 16, DType::kFP8E4M3, KvScaleMode::kStatic},
                      Case{7, 8, 2, 32, DType::kFP8E4M3, KvScaleMode::kDynamic},
                      Case{16, 32, 8, 128, DType::kFP8E4M3, KvScaleMode::kDynamic},
                      Case{16, 32, 8, 128, DType::kFP8E4M3, KvScaleMode::kStatic},
                      Case{1, 12, 1, 64, DType::kFP8E4M3, KvScaleMode::kStatic},
                      Case{32, 16, 4, 64, DType::kBF16}, Case{7, 8, 2, 64, DType::kBF16},
                      Case{16, 4, 1, 96, DType::kBF16}, Case{16, 32, 8, 128, DType::kBF16},
                      Case{16, 4, 2, 256, DType::kBF16},
                      Case{16, 6, 2, 96, DType::kFP8E4M3, KvScaleMode::kDynamic},
                      Case{3, 4, 2, 24, DType::kFP8E4M3, KvScaleMode::kDynamic}));

// Results do not depend on the page size (tiles are aligned on absolute positions), so a
// paged cache gives bit-identical output to a contiguous one.
TEST(PagedAttentionPageSize, BitIdenticalAcrossPageSizes) {
  for (KvScaleMode mode : {KvScaleMode::kStatic, KvScaleMode::kDynamic}) {
    const int len = 100, hd = 32, kvh = 2, nh = 8;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(len * kvh * hd), v(len * kvh * hd), q(nh * hd);
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    for (auto& x : q) x = nd(rng);
    std::vector<int32_t> seq(len, 0), pos(len);
    for (int i = 0; i < len; ++i) pos[i] = i;
    const int32_t last = len - 1, zero = 0;
    std::vector<std::vector<float>> first(3);
    for (int page_size : {1, 16, 33, 128}) {
      TestCache cache(KvLayout{1, kvh, hd, page_size, DType::kFP8E4M3, mode}, {len}, rng);
      kv_store(cache.view(), 0, k.data(), v.data(), seq, pos);
      for (AttnPath path : paths()) {
        std::vector<float> out(nh * hd);
        paged_attention_with_path(path, cache.view(), 0, q.data(), nh, 0.2f,
                                 std::span<const int32_t>(&zero, 1),
                                 std::span<const int32_t>(&last, 1), out.data(), nullptr);
        auto& want = first[static_cast<int>(path)];
        if (want.empty()) want = out;
        ASSERT_EQ(out, want) << "page_size " << page_size;
      }
    }
  }
}

// The AMX path takes BF16 and FP8 layouts with head_dim % 32 == 0 (its bits differ from the
// AVX-512 path's: a softmax over the whole context, q and weights in two bf16 parts) and hands
// the others (F32, head_dim 48) to the AVX-512 path (the same bits).
TEST(PagedAttentionAmx, TakesItsLayoutsAndHandsOnTheRest) {
  const std::vector<AttnPath> avail = paths();
  if (std::find(avail.begin(), avail.end(), AttnPath::kAmx) == avail.end()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  struct Layout {
    DType dtype;
    KvScaleMode mode;
    int hd;
    bool amx;
  };
  for (const Layout& c : {Layout{DType::kBF16, KvScaleMode::kNone, 64, true},
                          Layout{DType::kBF16, KvScaleMode::kNone, 128, true},
                          Layout{DType::kBF16, KvScaleMode::kNone, 96, true},
                          Layout{DType::kFP8E4M3, KvScaleMode::kDynamic, 64, true},
                          Layout{DType::kFP8E4M3, KvScaleMode::kStatic, 128, true},
                          Layout{DType::kF32, KvScaleMode::kNone, 64, false},
                          Layout{DType::kBF16, KvScaleMode::kNone, 48, false}}) {
    const int len = 300, kvh = 2, nh = 8;
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(len * kvh * c.hd), v(k.size()), q(nh * c.hd);
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    for (auto& x : q) x = nd(rng);
    std::vector<int32_t> seq(len, 0), pos(len);
    for (int i = 0; i < len; ++i) pos[i] = i;
    TestCache cache(KvLayout{1, kvh, c.hd, 16, c.dtype, c.mode}, {len}, rng);
    kv_store(cache.view(), 0, k.data(), v.data(), seq, pos);
    const int32_t last = len - 1, zero = 0;
    std::vector<float> amx(nh * c.hd), avx(nh * c.hd);
    paged_attention_with_path(AttnPath::kAmx, cache.view(), 0, q.data(), nh, 0.125f, std::span<const int32_t>(&zero, 1),
                              std::span<const int32_t>(&last, 1), amx.data(), nullptr);
    paged_attention_with_path(AttnPath::kAvx512, cache.view(), 0, q.data(), nh, 0.125f, std::span<const int32_t>(&zero, 1),
                              std::span<const int32_t>(&last, 1), avx.data(), nullptr);
    int differ = 0;
    for (size_t i = 0; i < amx.size(); ++i) {
      differ += amx[i] != avx[i];
      EXPECT_NEAR(amx[i], avx[i], 1e-3) << dtype_name(c.dtype) << " hd " << c.hd << " element " << i;
    }
    if (c.amx) {
      EXPECT_GT(differ, 0) << dtype_name(c.dtype) << " hd " << c.hd << ": the AMX path did not run";
    } else {
      EXPECT_EQ(differ, 0) << dtype_name(c.dtype) << " hd " << c.hd << ": not handed to the AVX-512 path";
    }
  }
}

// An AMX item of several passes (here a 16-token prefill run: 64 (query, head) pairs, 8 passes)
// decodes its K rows and value tiles once for all passes, or, past the kept limit, in each pass.
// The bytes are the same either way, so the bits must be.
TEST(PagedAttentionAmx, KeptRowsGiveTheBitsOfRowsDecodedPerPass) {
  const std::vector<AttnPath> avail = paths();
  if (std::find(avail.begin(), avail.end(), AttnPath::kAmx) == avail.end()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  struct Layout {
    DType dtype;
    KvScaleMode mode;
    int hd, page_size;
  };
  for (const Layout& c : {Layout{DType::kBF16, KvScaleMode::kNone, 64, 16},  // V kept, K read in place
                          Layout{DType::kBF16, KvScaleMode::kNone, 96, 33},  // K kept too
                          Layout{DType::kFP8E4M3, KvScaleMode::kDynamic, 64, 16},
                          Layout{DType::kFP8E4M3, KvScaleMode::kStatic, 128, 16},
                          Layout{DType::kFP8E4M3, KvScaleMode::kDynamic, 32, 7}}) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " hd " + std::to_string(c.hd) + " page " +
                 std::to_string(c.page_size));
    const int len = 300, run = 16, kvh = 2, nh = 8;
    std::mt19937 rng(21);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(len * kvh * c.hd), v(k.size()), q(run * nh * c.hd);
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    for (auto& x : q) x = nd(rng);
    std::vector<int32_t> seq(len, 0), pos(len);
    for (int i = 0; i < len; ++i) pos[i] = i;
    TestCache cache(KvLayout{1, kvh, c.hd, c.page_size, c.dtype, c.mode}, {len}, rng);
    kv_store(cache.view(), 0, k.data(), v.data(), seq, pos);
    const std::span<const int32_t> run_seq(seq.data(), run), run_pos(pos.data() + len - run, run);
    std::vector<float> kept(q.size()), per_pass(q.size());
    paged_attention_with_path(AttnPath::kAmx, cache.view(), 0, q.data(), nh, 0.125f, run_seq, run_pos, kept.data(),
                              nullptr);
    const int64_t limit = amx_attention_set_kept_limit(0);
    paged_attention_with_path(AttnPath::kAmx, cache.view(), 0, q.data(), nh, 0.125f, run_seq, run_pos,
                              per_pass.data(), nullptr);
    amx_attention_set_kept_limit(limit);
    EXPECT_EQ(limit, 8 << 20);
    ASSERT_EQ(kept, per_pass);
    EXPECT_TRUE(std::all_of(kept.begin(), kept.end(), [](float x) { return std::isfinite(x) && x != 0.0f; }));
  }
}

// paged_attention_prefetch asks for exactly the rows attention will read: positions 0 .. the
// last of each sequence in the batch (a 3-token chunk of one and a decode token of another),
// K and V of every kv head, plus a dynamic FP8 row's scale; within max_bytes it prefetches and
// says so, one byte over it does nothing. The cache is unchanged either way.
TEST(PagedAttentionPrefetch, CountsTheRowsAttentionReadsAndChangesNothing) {
  for (auto [dtype, mode] : {std::pair{DType::kBF16, KvScaleMode::kNone}, {DType::kFP8E4M3, KvScaleMode::kDynamic}}) {
    const int kvh = 2, hd = 32;
    std::mt19937 rng(9);
    TestCache cache(KvLayout{2, kvh, hd, 16, dtype, mode}, {40, 7}, rng);
    for (int64_t i = 0; i < cache.layout.page_bytes() * 4; ++i) cache.bytes[i] = static_cast<uint8_t>(rng());
    const std::vector<uint8_t> before(cache.bytes.get(), cache.bytes.get() + cache.layout.page_bytes() * 4);
    const std::vector<int32_t> seq = {0, 0, 0, 1}, pos = {37, 38, 39, 6};
    const int64_t row = hd * (dtype == DType::kBF16 ? 2 : 1) + (mode == KvScaleMode::kDynamic ? 4 : 0);
    const int64_t want = (40 + 7) * kvh * 2 * row;
    EXPECT_FALSE(paged_attention_prefetch(cache.view(), 1, seq, pos, want - 1));
    EXPECT_TRUE(paged_attention_prefetch(cache.view(), 1, seq, pos, want));
    EXPECT_TRUE(paged_attention_prefetch(cache.view(), 0, seq, pos, want));
    EXPECT_EQ(0, std::memcmp(before.data(), cache.bytes.get(), before.size()));
  }
}

// kv_store over a pool writes the bytes of the serial store for a batch in ascending (sequence,
// position) order (split over the threads), and for any other order keeps the serial order: of
// two tokens on one slot the later one's row is stored.
TEST(KvStore, APoolStoresTheSerialBytesAndTheLaterOfTwoOnOneSlot) {
  ThreadPool pool(2, 5000);
  for (auto [dtype, mode] : {std::pair{DType::kBF16, KvScaleMode::kNone}, {DType::kFP8E4M3, KvScaleMode::kDynamic},
                             {DType::kFP8E4M3, KvScaleMode::kStatic}}) {
    const int kvh = 2, hd = 64, layers = 2;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // Two sequences' prefill chunks (300 and 200 tokens) in one batch: ascending.
    std::vector<int32_t> seq, pos;
    for (int i = 0; i < 300; ++i) seq.push_back(0), pos.push_back(i);
    for (int i = 0; i < 200; ++i) seq.push_back(1), pos.push_back(i);
    const size_t n = seq.size();
    std::vector<float> k(n * kvh * hd), v(k.size());
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    std::mt19937 rng_a(7), rng_b(7);  // the same page order for both caches
    TestCache serial(KvLayout{layers, kvh, hd, 16, dtype, mode}, {300, 200}, rng_a);
    TestCache pooled(KvLayout{layers, kvh, hd, 16, dtype, mode}, {300, 200}, rng_b);
    const int64_t bytes = serial.layout.page_bytes() * static_cast<int64_t>(serial.table.size());
    std::fill_n(serial.bytes.get(), bytes, uint8_t{0xAB});
    std::fill_n(pooled.bytes.get(), bytes, uint8_t{0xAB});
    kv_store(serial.view(), 1, k.data(), v.data(), seq, pos);
    kv_store(pooled.view(), 1, k.data(), v.data(), seq, pos, &pool);
    ASSERT_EQ(0, std::memcmp(serial.bytes.get(), pooled.bytes.get(), bytes)) << dtype_name(dtype);

    // Not ascending, with slot (0, 5) written twice: the second token's row must be the one kept.
    const std::vector<int32_t> seq2 = {1, 0, 0, 0}, pos2 = {3, 5, 4, 5};
    kv_store(pooled.view(), 0, k.data(), v.data(), seq2, pos2, &pool);
    const std::vector<int32_t> seq3 = {0}, pos3 = {5};
    const int64_t row = static_cast<int64_t>(kvh) * hd;
    kv_store(serial.view(), 0, k.data() + 3 * row, v.data() + 3 * row, seq3, pos3);
    const int32_t page = serial.table[serial.offsets[0] + 5 / 16];
    const uint8_t* a = serial.bytes.get() + page * serial.layout.page_bytes();
    const uint8_t* b = pooled.bytes.get() + page * pooled.layout.page_bytes();
    for (int which = 0; which < 2; ++which) {
      for (int h = 0; h < kvh; ++h) {
        const int64_t off = serial.layout.data_offset(0, which, h, 5);
        EXPECT_EQ(0, std::memcmp(a + off, b + off, static_cast<size_t>(hd * serial.layout.elem_bytes())))
            << dtype_name(dtype) << " which " << which << " head " << h;
      }
    }
  }
}

// ---- Tile primitives, each ISA against the scalar twin. ----

std::vector<const attention_internal::AttnTileOps*> tile_ops() {
  std::vector<const attention_internal::AttnTileOps*> v = {&attention_internal::kScalarOps};
  if (cpu_isa_hardware() == CpuIsa::kAvx512Bf16) v.push_back(&attention_internal::kAvx512Ops);
  return v;
}

// Every fp8 code except the two NaNs decodes to table value / fp8_unit, on every ISA, at every
// lane position of a row (the 32-code and 16-code paths both).
TEST(AttentionTileOps, Fp8RowsDecodeEveryCode) {
  const float* table = fp8_e4m3_decode_table();
  for (const auto* ops : tile_ops()) {
    for (int hd : {16, 48, 64, 256}) {
      std::vector<uint8_t> codes(static_cast<size_t>(kAttnTileForTest) * hd);
      for (size_t i = 0; i < codes.size(); ++i) {
        uint8_t c = static_cast<uint8_t>((i * 37 + i / 256) & 0xff);
        if ((c & 0x7f) == 0x7f) c = 0x00;
        codes[i] = c;
      }
      const uint8_t* rows[kAttnTileForTest];
      for (int t = 0; t < kAttnTileForTest; ++t) rows[t] = codes.data() + static_cast<size_t>(t) * hd;
      std::vector<float> out(codes.size());
      ops->decode_rows(rows, kAttnTileForTest, hd, DType::kFP8E4M3, out.data());
      for (size_t i = 0; i < codes.size(); ++i)
        ASSERT_EQ(out[i] * ops->fp8_unit, table[codes[i]]) << "code " << int(codes[i]) << " hd " << hd;
    }
  }
}

// A group's scores are each head's scores alone, bit for bit (the AVX-512 path takes heads in
// pairs, and a pair's rows in halves of 8), for partial tiles too; entries past n stay as they
// were.
TEST(AttentionTileOps, ScoresOfAGroupAreEachHeadsAlone) {
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const auto* ops : tile_ops()) {
    for (int hd : {16, 48, 64, 128}) {
      for (int group : {1, 2, 3, 5}) {
        for (int n : {16, 9, 8, 3, 1}) {
          std::vector<float> q(static_cast<size_t>(group) * hd), k(static_cast<size_t>(kAttnTileForTest) * hd);
          std::vector<float> ks(kAttnTileForTest);
          for (auto& x : q) x = nd(rng);
          for (auto& x : k) x = nd(rng);
          for (auto& x : ks) x = 0.25f + std::fabs(nd(rng));
          constexpr float kUntouched = 12345.0f;
          std::vector<float> all(static_cast<size_t>(group) * kAttnTileForTest, kUntouched), one = all;
          ops->scores(q.data(), group, k.data(), n, hd, ks.data(), all.data());
          for (int g = 0; g < group; ++g) {
            ops->scores(q.data() + static_cast<size_t>(g) * hd, 1, k.data(), n, hd, ks.data(),
                        one.data() + static_cast<size_t>(g) * kAttnTileForTest);
          }
          for (int g = 0; g < group; ++g) {
            for (int t = 0; t < kAttnTileForTest; ++t) {
              const size_t i = static_cast<size_t>(g) * kAttnTileForTest + t;
              if (t >= n) {
                ASSERT_EQ(all[i], kUntouched) << "entry past n written: g " << g << " t " << t;
              } else {
                ASSERT_EQ(all[i], one[i]) << "hd " << hd << " group " << group << " n " << n << " g " << g << " t " << t;
              }
            }
          }
        }
      }
    }
  }
}

// accumulate_rows (V decoded in registers) gives bit-identically what decode_rows + accumulate
// give, for every dtype, group size (including > 8, two register passes) and head_dim with a
// 16-lane tail, with partial tiles.
TEST(AttentionTileOps, AccumulateRowsEqualsDecodeThenAccumulate) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const auto* ops : tile_ops()) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kFP8E4M3}) {
      for (int hd : {16, 48, 64, 128, 80}) {
        for (int group : {1, 3, 4, 8, 11}) {
          for (int n : {16, 5}) {
            const int64_t rb = hd * (dtype == DType::kF32 ? 4 : dtype == DType::kBF16 ? 2 : 1);
            std::vector<uint8_t> bytes(static_cast<size_t>(n * rb));
            for (int t = 0; t < n; ++t) {
              for (int d = 0; d < hd; ++d) {
                const float x = nd(rng);
                uint8_t* p = bytes.data() + t * rb;
                if (dtype == DType::kF32) {
                  std::memcpy(p + 4 * d, &x, 4);
                } else if (dtype == DType::kBF16) {
                  const uint16_t b = f32_to_bf16(x);
                  std::memcpy(p + 2 * d, &b, 2);
                } else {
                  uint8_t c = static_cast<uint8_t>(byte(rng));
                  p[d] = (c & 0x7f) == 0x7f ? 0x3c : c;
                }
              }
            }
            const uint8_t* rows[kAttnTileForTest];
            for (int t = 0; t < n; ++t) rows[t] = bytes.data() + t * rb;
            std::vector<float> w(static_cast<size_t>(group) * kAttnTileForTest), init(static_cast<size_t>(group) * hd);
            for (auto& x : w) x = std::fabs(nd(rng));
            for (auto& x : init) x = nd(rng);
            std::vector<float> decoded(static_cast<size_t>(n) * hd), want = init, got = init;
            ops->decode_rows(rows, n, hd, dtype, decoded.data());
            ops->accumulate(w.data(), group, decoded.data(), n, hd, want.data());
            ops->accumulate_rows(w.data(), group, rows, n, hd, dtype, got.data());
            ASSERT_EQ(got, want) << dtype_name(dtype) << " hd " << hd << " group " << group << " n " << n;
          }
        }
      }
    }
  }
}

// The online-softmax step against a double-precision model of its contract: the running max,
// the rescaled sum and accumulator, and the stored weights; partial tiles leave the rest alone.
TEST(AttentionTileOps, SoftmaxUpdateFollowsTheContract) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (const auto* ops : tile_ops()) {
    const int group = 3, hd = 32;
    for (int n : {16, 7, 1}) {
      std::vector<float> s(static_cast<size_t>(group) * kAttnTileForTest), vs(kAttnTileForTest);
      for (auto& x : s) x = nd(rng);
      for (auto& x : vs) x = 0.5f + std::fabs(nd(rng));
      // Head 0 starts fresh, head 1 has a larger running max, head 2 a smaller one.
      float m[3] = {-std::numeric_limits<float>::infinity(), 50.0f, -50.0f};
      float l[3] = {0.0f, 2.0f, 3.0f};
      std::vector<float> acc(static_cast<size_t>(group) * hd);
      for (auto& x : acc) x = nd(rng);
      const std::vector<float> s0 = s, acc0 = acc;
      const float m0[3] = {m[0], m[1], m[2]}, l0[3] = {l[0], l[1], l[2]};
      ops->softmax_update(s.data(), group, n, hd, vs.data(), m, l, acc.data());
      for (int g = 0; g < group; ++g) {
        double mx = m0[g];
        for (int t = 0; t < n; ++t) mx = std::max(mx, double(s0[g * kAttnTileForTest + t]));
        EXPECT_EQ(m[g], static_cast<float>(mx));
        const double c = std::exp(double(m0[g]) - mx);
        double sum = l0[g] * c;
        for (int t = 0; t < kAttnTileForTest; ++t) {
          const float got = s[g * kAttnTileForTest + t];
          if (t >= n) {
            EXPECT_EQ(got, s0[g * kAttnTileForTest + t]) << "entry past n touched";
            continue;
          }
          const double p = std::exp(double(s0[g * kAttnTileForTest + t]) - mx);
          sum += p;
          EXPECT_NEAR(got, p * vs[t], 1e-6 * (1 + p * vs[t])) << "g " << g << " t " << t;
        }
        EXPECT_NEAR(l[g], sum, 1e-5 * sum);
        for (int d = 0; d < hd; ++d)
          EXPECT_NEAR(acc[g * hd + d], acc0[g * hd + d] * c, 1e-6 * (1 + std::fabs(acc0[g * hd + d])));
      }
    }
  }
}

TEST(PagedAttentionDeathTest, StaticFp8WithoutScalesFails) {
  KvLayout layout{1, 1, 16, 16, DType::kFP8E4M3, KvScaleMode::kStatic};
  std::vector<uint8_t> bytes(layout.page_bytes());
  const std::vector<int32_t> table = {0}, offsets = {0, 1};
  const KvView kv{layout, bytes.data(), table, offsets, nullptr};
  std::vector<float> row(16, 1.0f), out(16);
  const int32_t zero = 0;
  const std::span<const int32_t> one(&zero, 1);
  EXPECT_DEATH(kv_store(kv, 0, row.data(), row.data(), one, one), "without scales");
  EXPECT_DEATH(paged_attention(kv, 0, row.data(), 1, 1.0f, one, one, out.data(), nullptr),
               "without scales");
  KvLayout no_mode = layout;
  no_mode.scale_mode = KvScaleMode::kNone;
  const KvView kv2{no_mode, bytes.data(), table, offsets, nullptr};
  EXPECT_DEATH(kv_store(kv2, 0, row.data(), row.data(), one, one), "needs static or dynamic");
}

}  // namespace
}  // namespace densa
