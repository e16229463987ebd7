// kernels/dsa_attention's lightning-indexer scoring: every ISA level against the scalar twin bit
// for bit (kernels/internal/dsa_index_isa.h fixes the order of every fma), over index widths
// that are and are not whole vectors, head counts around the 8-head block, ranges that start and
// end inside a block, shuffled pages, every one of the 256 FP8 codes (NaN included) and zero
// key scales; the twin against a double-precision evaluation of the formula; and the top-k
// selection against a full sort, ties included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/dsa_attention.h"
#include "kernels/internal/dsa_index_isa.h"
#include "kv/page_pool.h"
#include "quant/fp8.h"
#include "test_util.h"

namespace densa {
namespace {

KvLayout index_layout(int index_dim, int page_size) {
  KvLayout l;
  l.num_layers = 2;
  l.page_size = page_size;
  l.dtype = DType::kBF16;
  l.latent_dim = 24;
  l.index_dim = index_dim;
  return l;
}

// A pool holding one sequence of `tokens` positions on shuffled pages, with index keys in
// layer 1: FP8 codes cycling through all 256 byte values (offset per position) and scales
// drawn from a normal distribution's magnitude, every 7th one zero.
struct IndexCache {
  KvLayout layout;
  PagePool pool;
  std::vector<int32_t> pages;
  std::vector<int32_t> offsets;

  KvView view() { return KvView{layout, pool.base(), pages, offsets, nullptr}; }

  static IndexCache make(int index_dim, int page_size, int tokens, uint32_t seed) {
    const KvLayout l = index_layout(index_dim, page_size);
    const int num_pages = (tokens + page_size - 1) / page_size;
    Result<PagePool> made = PagePool::create(l, l.page_bytes() * num_pages);
    CHECK(made.is_ok());
    IndexCache c{l, std::move(made).value(), {}, {}};
    for (int i = 0; i < num_pages; ++i) c.pages.push_back(c.pool.allocate()->value);
    std::shuffle(c.pages.begin(), c.pages.end(), std::mt19937(seed));
    c.offsets = {0, num_pages};
    const std::vector<float> scales = testing::normal_floats(static_cast<size_t>(tokens), seed + 1);
    for (int p = 0; p < tokens; ++p) {
      uint8_t* page = c.pool.base() + static_cast<int64_t>(c.pages[p / page_size]) * l.page_bytes();
      const int slot = p % page_size;
      const float s = p % 7 == 3 ? 0.0f : std::fabs(scales[p]) / 64.0f;
      std::memcpy(page + l.index_scale_offset(1, slot), &s, 4);
      uint8_t* codes = page + l.index_key_offset(1, slot);
      for (int d = 0; d < index_dim; ++d) codes[d] = static_cast<uint8_t>((p * 37 + d * 11) & 0xff);
    }
    return c;
  }
};

std::vector<float> scores_at(CpuIsa isa, IndexCache& c, const dsa_internal::IndexQuery& q, int32_t pos,
                             ThreadPool* pool) {
  std::vector<float> out(static_cast<size_t>(pos) + 1, -9.0f);
  dsa_internal::index_scores_with_isa(isa, c.view(), 1, q, 0, pos, out.data(), pool);
  return out;
}

std::vector<CpuIsa> levels() {
  std::vector<CpuIsa> all;
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Bf16}) {
    if (static_cast<int>(isa) <= static_cast<int>(cpu_isa_hardware())) all.push_back(isa);
  }
  return all;
}

TEST(DsaIndex, EveryIsaMatchesTheScalarTwinBitForBit) {
  ThreadPool two(2);
  int compared = 0;
  for (int dim : {16, 40, 128}) {
    for (int heads : {1, 3, 8, 11, 32}) {
      const int tokens = 1500 + dim;  // past one 1,024-position pool block, not a whole 16
      IndexCache c = IndexCache::make(dim, dim == 40 ? 4 : 16, tokens, static_cast<uint32_t>(dim * 100 + heads));
      const std::vector<float> q = testing::normal_floats(static_cast<size_t>(heads * dim), 7 + heads);
      std::vector<float> w = testing::normal_floats(static_cast<size_t>(heads), 8 + heads);
      const dsa_internal::IndexQuery query{q.data(), w.data(), heads, 1.0f / std::sqrt(static_cast<float>(dim))};
      for (int32_t pos : {0, 5, 16, 17, 100, tokens - 1}) {
        const std::vector<float> want = scores_at(CpuIsa::kScalar, c, query, pos, nullptr);
        for (CpuIsa isa : levels()) {
          for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two}) {
            const std::vector<float> got = scores_at(isa, c, query, pos, pool);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
                << cpu_isa_name(isa) << " dim " << dim << " heads " << heads << " pos " << pos;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GE(compared, 5 * 3 * 6 * 2);
}

// The twin is the formula: sum_h w_h * relu(scale * s_p * q_h . decode(c_p)) in double,
// within fp32 rounding of the magnitude of its terms. NaN codes make a head's term 0.
TEST(DsaIndex, ScalarTwinIsTheFormula) {
  const int dim = 40, heads = 5, tokens = 300;
  IndexCache c = IndexCache::make(dim, 8, tokens, 5);
  const std::vector<float> q = testing::normal_floats(heads * dim, 6);
  const std::vector<float> w = testing::normal_floats(heads, 9);
  const float scale = 0.3f;
  const std::vector<float> got = scores_at(CpuIsa::kScalar, c, {q.data(), w.data(), heads, scale}, tokens - 1, nullptr);
  const float* table = fp8_e4m3_decode_table();
  const KvLayout& l = c.layout;
  int positive = 0;
  for (int p = 0; p < tokens; ++p) {
    const uint8_t* page = c.pool.base() + static_cast<int64_t>(c.pages[p / l.page_size]) * l.page_bytes();
    float s;
    std::memcpy(&s, page + l.index_scale_offset(1, p % l.page_size), 4);
    const uint8_t* codes = page + l.index_key_offset(1, p % l.page_size);
    double total = 0, mag = 0;
    for (int h = 0; h < heads; ++h) {
      double dot = 0, dmag = 0;
      bool nan = false;
      for (int d = 0; d < dim; ++d) {
        const double k = table[codes[d]];
        nan = nan || std::isnan(k);
        dot += static_cast<double>(q[h * dim + d]) * k;
        dmag += std::fabs(static_cast<double>(q[h * dim + d]) * k);
      }
      const double v = nan ? 0.0 : dot * s * scale;
      total += w[h] * std::max(0.0, v);
      mag += std::fabs(w[h]) * (nan ? 0.0 : dmag * s * scale);
      positive += v > 0;
    }
    ASSERT_LE(std::fabs(got[p] - total), 1e-6 * mag + 1e-30) << "p " << p;
  }
  EXPECT_GT(positive, tokens);  // the relu passes some heads and stops others
}

// Every e4m3 byte decodes to the table's value on every level: with one head, a one-hot query
// and a unit scale, s_p = relu(decode(code at d)).
TEST(DsaIndex, EveryCodeDecodesExactly) {
  const int dim = 16, tokens = 256;
  IndexCache c = IndexCache::make(dim, 16, tokens, 1);
  const KvLayout& l = c.layout;
  for (int p = 0; p < tokens; ++p) {
    uint8_t* page = c.pool.base() + static_cast<int64_t>(c.pages[p / l.page_size]) * l.page_bytes();
    const float one = 1.0f;
    std::memcpy(page + l.index_scale_offset(1, p % l.page_size), &one, 4);
    uint8_t* codes = page + l.index_key_offset(1, p % l.page_size);
    std::memset(codes, 0, dim);
    codes[5] = static_cast<uint8_t>(p);
  }
  std::vector<float> q(dim, 0.0f);
  q[5] = 1.0f;
  const float w = 1.0f;
  const float* table = fp8_e4m3_decode_table();
  for (CpuIsa isa : levels()) {
    const std::vector<float> got = scores_at(isa, c, {q.data(), &w, 1, 1.0f}, tokens - 1, nullptr);
    for (int code = 0; code < 256; ++code) {
      const float v = table[code];
      const float want = v > 0.0f ? v : 0.0f;
      ASSERT_EQ(got[code], want) << cpu_isa_name(isa) << " code " << code;
    }
  }
}

// Top-k: the k best scores, ties to the lower position, listed ascending; scores tie in runs
// here because every position's key repeats in blocks of 4 positions.
TEST(DsaIndex, SelectionIsTheSortedTopKWithTiesToTheLowerPosition) {
  const int dim = 16, heads = 2, tokens = 400, topk = 37;
  IndexCache c = IndexCache::make(dim, 8, tokens, 2);
  const KvLayout& l = c.layout;
  for (int p = 0; p < tokens; ++p) {  // position p takes position (p / 4 * 4)'s key and scale
    const int src = p / 4 * 4;
    const uint8_t* from = c.pool.base() + static_cast<int64_t>(c.pages[src / l.page_size]) * l.page_bytes();
    uint8_t* to = c.pool.base() + static_cast<int64_t>(c.pages[p / l.page_size]) * l.page_bytes();
    std::memmove(to + l.index_key_offset(1, p % l.page_size), from + l.index_key_offset(1, src % l.page_size), dim);
    std::memmove(to + l.index_scale_offset(1, p % l.page_size), from + l.index_scale_offset(1, src % l.page_size), 4);
  }
  const std::vector<float> q = testing::normal_floats(heads * dim, 3);
  const std::vector<float> w = {0.8f, 0.4f};
  std::vector<float> s(tokens);
  dsa_index_scores(c.view(), 1, q.data(), w.data(), heads, 0.5f, 0, tokens - 1, s.data());
  std::vector<int32_t> order(tokens);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
  std::vector<int32_t> want(order.begin(), order.begin() + topk);
  std::sort(want.begin(), want.end());
  ASSERT_EQ(s[order[topk - 1]], s[order[topk]]) << "the fixture should cut through a run of ties";
  const std::vector<int32_t> seq = {0}, pos = {tokens - 1};
  std::vector<int32_t> sel(topk), count(1);
  ThreadPool two(2);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two}) {
    dsa_select_topk(c.view(), 1, q.data(), w.data(), heads, 0.5f, topk, seq, pos, sel.data(), count.data(), pool);
    EXPECT_EQ(count[0], topk);
    EXPECT_EQ(sel, want);
  }
}

}  // namespace
}  // namespace densa
