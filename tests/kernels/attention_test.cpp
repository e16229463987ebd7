// Paged attention against the naive contiguous oracle, for several page sizes, shuffled
// page placement, GQA groupings and both storage dtypes.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "kernels/reference/attention_ref.h"

namespace densa {
namespace {

struct Case {
  int page_size;
  int num_heads;
  int num_kv_heads;
  int head_dim;
  DType dtype;
};

class PagedAttention : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttention, MatchesContiguousReference) {
  const Case c = GetParam();
  const int num_seqs = 3, layers = 2;
  const std::vector<int> lens = {1, 37, 70};
  KvLayout layout{layers, c.num_kv_heads, c.head_dim, c.page_size, c.dtype, KvScaleMode::kNone};
  // Pages of all sequences scattered over a pool in a random order.
  std::vector<int32_t> table, offsets = {0};
  int total_pages = 0;
  for (int len : lens) total_pages += (len + c.page_size - 1) / c.page_size;
  std::vector<int32_t> perm(total_pages);
  for (int i = 0; i < total_pages; ++i) perm[i] = i;
  std::mt19937 rng(7);
  std::shuffle(perm.begin(), perm.end(), rng);
  int next = 0;
  for (int len : lens) {
    for (int p = 0; p < (len + c.page_size - 1) / c.page_size; ++p) table.push_back(perm[next++]);
    offsets.push_back(static_cast<int32_t>(table.size()));
  }
  auto pool_bytes = std::make_unique<uint8_t[]>(layout.page_bytes() * total_pages);
  KvView kv{layout, pool_bytes.get(), table, offsets, nullptr};

  const int kv_dim = c.num_kv_heads * c.head_dim, q_dim = c.num_heads * c.head_dim;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // Contiguous copies of what was stored (rounded like the cache rounds it).
  std::vector<std::vector<float>> ks(num_seqs), vs(num_seqs);
  const int layer = 1;
  for (int s = 0; s < num_seqs; ++s) {
    ks[s].resize(lens[s] * kv_dim);
    vs[s].resize(lens[s] * kv_dim);
    for (auto& x : ks[s]) x = nd(rng);
    for (auto& x : vs[s]) x = nd(rng);
    if (c.dtype == DType::kBF16) {
      for (auto& x : ks[s]) x = bf16_to_f32(f32_to_bf16(x));
      for (auto& x : vs[s]) x = bf16_to_f32(f32_to_bf16(x));
    }
    std::vector<int32_t> seq(lens[s], s), pos(lens[s]);
    for (int i = 0; i < lens[s]; ++i) pos[i] = i;
    kv_store(kv, layer, ks[s].data(), vs[s].data(), seq, pos);
  }
  // Queries: several positions of every sequence in one batch.
  std::vector<int32_t> qseq, qpos;
  for (int s = 0; s < num_seqs; ++s)
    for (int p : {0, lens[s] / 2, lens[s] - 1}) { qseq.push_back(s); qpos.push_back(p); }
  const int n = static_cast<int>(qseq.size());
  std::vector<float> q(n * q_dim), out(n * q_dim), want(q_dim);
  for (auto& x : q) x = nd(rng);
  ThreadPool tp(2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  paged_attention(kv, layer, q.data(), c.num_heads, scale, qseq, qpos, out.data(), &tp);
  for (int i = 0; i < n; ++i) {
    ref::attention_one(q.data() + i * q_dim, ks[qseq[i]].data(), vs[qseq[i]].data(), qpos[i],
                       c.num_heads, c.num_kv_heads, c.head_dim, scale, want.data());
    for (int d = 0; d < q_dim; ++d) EXPECT_NEAR(out[i * q_dim + d], want[d], 2e-5) << "token " << i;
  }
  // Batch invariance: each query alone gives bit-identical output.
  for (int i = 0; i < n; ++i) {
    std::vector<float> one(q_dim);
    paged_attention(kv, layer, q.data() + i * q_dim, c.num_heads, scale,
                    std::span<const int32_t>(&qseq[i], 1), std::span<const int32_t>(&qpos[i], 1),
                    one.data(), nullptr);
    for (int d = 0; d < q_dim; ++d) ASSERT_EQ(one[d], out[i * q_dim + d]);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttention,
                         ::testing::Values(Case{16, 8, 4, 16, DType::kF32}, Case{1, 8, 4, 16, DType::kF32},
                                           Case{7, 4, 4, 32, DType::kF32}, Case{16, 8, 1, 64, DType::kBF16},
                                           Case{128, 8, 2, 16, DType::kBF16}));

}  // namespace
}  // namespace densa
