// Decode attention time per token against context length on one GLM-5-shaped layer: dense MLA
// (kernels/mla_attention.h over every cached token) against DeepSeek Sparse Attention
// (kernels/dsa_attention.h: the lightning indexer scores every cached token, then MLA over the
// top index_topk). Shape: 64 heads, latent 512 + 64 (BF16 rows), indexer 32 heads x 128 (FP8
// keys), index_topk 2048. One decode query per context length, single thread (pool null) for
// both, median of `rounds`. DSA's attention part is flat beyond index_topk; its indexer part
// still grows with the context, at 32 x 128 multiply-adds per cached token against dense MLA's
// 64 x (576 + 512).
// Bytes of KV read per token (per layer) are counted from the layout, not measured: dense MLA
// reads every cached latent row (576 BF16 values, 1,152 B); DSA reads every cached index key
// (128 FP8 codes + an f32 scale, 132 B) and the latent rows of at most index_topk tokens (while
// the context fits in index_topk, only the latent rows: the indexer does not run).
//
//   ./build/dsa_decode_bench [--rounds N] [--max-context N] [--threads N]
// --threads: a pool for all three kernels (default 1: no pool); the dense kernel splits its
// heads over it, the indexer a decode query's positions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/dsa_attention.h"
#include "kernels/mla_attention.h"
#include "kv/page_pool.h"

namespace densa {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kHeads = 64, kLatent = 512, kRope = 64, kIndexHeads = 32, kIndexDim = 128, kTopk = 2048;
constexpr int kPage = 64;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename Fn>
double time_ms(int rounds, Fn fn) {
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    const auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
  }
  return median(t);
}

int run(int rounds, int max_context, int threads) {
  std::unique_ptr<ThreadPool> pool_owner = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  ThreadPool* tp = pool_owner.get();
  std::printf("# one GLM-5-shaped layer, one decode query, %d thread(s); ms per token (median of %d)\n", threads,
              rounds);
  std::printf("%10s %12s %12s %12s %12s %8s %14s %14s\n", "context", "dense_mla", "dsa_total", "dsa_index",
              "dsa_attend", "ratio", "dense_kv_B", "dsa_kv_B");
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int T = 512; T <= max_context; T *= 2) {
    KvLayout l;
    l.num_layers = 1;
    l.page_size = kPage;
    l.dtype = DType::kBF16;
    l.latent_dim = kLatent + kRope;
    l.index_dim = kIndexDim;
    const int pages = (T + kPage - 1) / kPage;
    Result<PagePool> made = PagePool::create(l, l.page_bytes() * pages);
    if (!made.is_ok()) {
      std::fprintf(stderr, "%s\n", made.status().to_string().c_str());
      return 1;
    }
    PagePool pool = std::move(made).value();
    std::vector<int32_t> table;
    for (int p = 0; p < pages; ++p) table.push_back(pool.allocate()->value);
    const std::vector<int32_t> offsets = {0, pages};
    KvView kv{l, pool.base(), table, offsets, nullptr};
    // Fill the cache in chunks (latent rows and index keys of every position).
    const int chunk = 256;
    std::vector<float> rows(static_cast<size_t>(chunk) * l.latent_dim), keys(static_cast<size_t>(chunk) * kIndexDim);
    for (int b = 0; b < T; b += chunk) {
      const int n = std::min(chunk, T - b);
      for (float& x : rows) x = nd(rng);
      for (float& x : keys) x = nd(rng);
      std::vector<int32_t> seq(n, 0), pos(n);
      std::iota(pos.begin(), pos.end(), b);
      mla_kv_store(kv, 0, rows.data(), kLatent, seq, pos);
      dsa_index_store(kv, 0, keys.data(), seq, pos);
    }
    std::vector<float> q(static_cast<size_t>(kHeads) * l.latent_dim), iq(kIndexHeads * kIndexDim), w(kIndexHeads);
    for (float& x : q) x = nd(rng) * 0.05f;
    for (float& x : iq) x = nd(rng);
    for (float& x : w) x = nd(rng);
    const std::vector<int32_t> seq = {0}, pos = {T - 1};
    std::vector<float> out(static_cast<size_t>(kHeads) * kLatent);
    std::vector<int32_t> sel(kTopk);
    int32_t count = 0;
    const double dense = time_ms(rounds, [&] {
      paged_mla_attention(kv, 0, q.data(), kHeads, kLatent, 0.07f, seq, pos, out.data(), tp);
    });
    const double index = time_ms(rounds, [&] {
      dsa_select_topk(kv, 0, iq.data(), w.data(), kIndexHeads, 0.088f, kTopk, seq, pos, sel.data(), &count, tp);
    });
    const double attend = time_ms(rounds, [&] {
      if (count == T) {
        paged_mla_attention(kv, 0, q.data(), kHeads, kLatent, 0.07f, seq, pos, out.data(), tp);
      } else {
        paged_mla_attention_sparse(kv, 0, q.data(), kHeads, kLatent, 0.07f, seq, sel.data(), &count, kTopk,
                                   out.data(), tp);
      }
    });
    const int64_t row_bytes = int64_t{l.latent_dim} * 2, key_bytes = kIndexDim + 4;
    const int64_t dense_bytes = int64_t{T} * row_bytes;
    // While the whole context fits in index_topk the indexer does not run (every token is kept).
    const int64_t dsa_bytes = (count == T ? 0 : int64_t{T} * key_bytes) + int64_t{count} * row_bytes;
    std::printf("%10d %12.3f %12.3f %12.3f %12.3f %8.2f %14lld %14lld\n", T, dense, index + attend, index, attend,
                dense / (index + attend), static_cast<long long>(dense_bytes), static_cast<long long>(dsa_bytes));
  }
  return 0;
}

}  // namespace
}  // namespace densa

int main(int argc, char** argv) {
  int rounds = 5, max_context = 131072, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--max-context") max_context = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--max-context N] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  return densa::run(std::max(1, rounds), std::max(512, max_context), std::max(1, threads));
}
