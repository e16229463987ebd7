// In-process A/B of two builds of the decode attention kernels (session 13's method; a record of
// how its kernel numbers were made, built by kernel_ab.sh, not by CMake).
//
// "old" is src/kernels/attention*.cpp of an earlier commit, compiled with its namespace and
// public names renamed (attention_internal_old, paged_attention_old, ...) so that both builds
// link into one binary; "new" is the tree's. By default it compares attend_run_amx, the AMX
// kernel, one call per kv head on the thread pool; PATH_AB=avx512 compares the AVX-512 path
// through paged_attention_with_path instead. Calls alternate old / new (which goes first alternating too), each on the next
// layer of a 1 GiB cache (as bench/attention_bench.cpp), so that both see the same minutes of
// this noisy VM. Prints each kernel's mean time per call, the median and range of the per-round
// time ratios new / old, and the largest difference between the two kernels' outputs (0 when
// the change keeps the bits).
//
//   kernel_ab CTX KV THREADS ROUNDS      KV: 0 bf16, 1 fp8 static scales, 2 fp8 dynamic
//   SAME=1: every call reads layer 0 (cache-resident).  PS=N: N tokens per page (16).
//   PS2=M: compare the new kernel on PS-token pages (as "old") with M-token pages instead.
//   NQ=N: each call attends N consecutive queries at positions CTX - N .. CTX - 1 (a prefill
//   run; 1: a decode step).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/huge_page_arena.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/internal/attention_isa.h"
#include "quant/fp8.h"

namespace densa::attention_internal_old {
enum class AttnPath : uint8_t { kScalar, kAvx512, kAmx };
void paged_attention_with_path(AttnPath path, const KvView& kv, int layer, const float* q, int num_heads, float scale,
                               std::span<const int32_t> seq_idx, std::span<const int32_t> positions, float* out,
                               ThreadPool* pool);
void attend_run_amx(const KvView& kv, int layer, int seq, int32_t pos0, int nq, int kvh, const float* q,
                    int64_t q_stride, int group, float scale, float* out);
}

namespace {

using namespace densa;

constexpr int kHeads = 16, kKvHeads = 4, kHeadDim = 64;  // the gen-model presets

// One sequence of `ctx` tokens in as many layers as fill 1 GiB, stored from N(0, 1) K and V.
struct Cache {
  KvLayout layout;
  int layers = 0;
  HugePages bytes;
  std::vector<int32_t> table, offsets;
  std::vector<float> scales;
  KvView view;

  Cache(int ctx, int page_size, DType dtype, KvScaleMode mode) {
    const KvLayout one{1, kKvHeads, kHeadDim, page_size, dtype, mode};
    const int pages = (ctx + page_size - 1) / page_size;
    layers = static_cast<int>(std::clamp<int64_t>((1ll << 30) / (one.page_bytes() * pages), 1, 1024));
    layout = one;
    layout.num_layers = layers;
    bytes = HugePages::map(static_cast<size_t>(layout.page_bytes() * pages));
    table.resize(pages);
    for (int p = 0; p < pages; ++p) table[p] = p;
    offsets = {0, pages};
    scales.assign(static_cast<size_t>(layers) * 2 * kKvHeads, 4.0f / kFp8E4M3Max);
    view = KvView{layout, bytes.data(), table, offsets, mode == KvScaleMode::kStatic ? scales.data() : nullptr};
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int chunk = 256;
    std::vector<float> k(static_cast<size_t>(chunk) * kKvHeads * kHeadDim), v(k.size());
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    std::vector<int32_t> seq(chunk, 0), pos(chunk);
    for (int l = 0; l < layers; ++l) {
      for (int b = 0; b < ctx; b += chunk) {
        const int n = std::min(chunk, ctx - b);
        for (int i = 0; i < n; ++i) pos[i] = b + i;
        kv_store(view, l, k.data(), v.data(), std::span<const int32_t>(seq.data(), n),
                 std::span<const int32_t>(pos.data(), n));
      }
    }
  }
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: kernel_ab CTX KV THREADS ROUNDS\n");
    return 2;
  }
  const int ctx = std::atoi(argv[1]), kv_setup = std::atoi(argv[2]), threads = std::atoi(argv[3]);
  const int rounds = std::max(1, std::atoi(argv[4]));
  const bool same = std::getenv("SAME") != nullptr;
  const int ps = env_int("PS", 16), ps2 = env_int("PS2", ps);
  const int nq = std::clamp(env_int("NQ", 1), 1, ctx);
  if (!cpu_has_amx_bf16()) {
    std::fprintf(stderr, "kernel_ab: no AMX-BF16 here\n");
    return 1;
  }
  const DType dtype = kv_setup == 0 ? DType::kBF16 : DType::kFP8E4M3;
  const KvScaleMode mode = kv_setup == 0   ? KvScaleMode::kNone
                           : kv_setup == 1 ? KvScaleMode::kStatic
                                           : KvScaleMode::kDynamic;
  Cache a(ctx, ps, dtype, mode);
  std::unique_ptr<Cache> b = ps2 != ps ? std::make_unique<Cache>(ctx, ps2, dtype, mode) : nullptr;
  const int layers = b ? std::min(a.layers, b->layers) : a.layers;

  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(nq) * kHeads * kHeadDim), out[2] = {std::vector<float>(q.size()), std::vector<float>(q.size())};
  for (auto& x : q) x = nd(rng);
  ThreadPool pool(threads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const int group = kHeads / kKvHeads;
  // which 0: the old kernel (or, with PS2, the new kernel on cache a); 1: the new kernel.
  const bool avx512 = std::getenv("PATH_AB") != nullptr && std::string(std::getenv("PATH_AB")) == "avx512";
  std::vector<int32_t> seq(nq, 0), pos(nq);
  for (int i = 0; i < nq; ++i) pos[i] = ctx - nq + i;
  auto call = [&](int which, int layer) {
    const KvView& kv = which == 1 && b ? b->view : a.view;
    float* o = out[which].data();
    if (avx512) {
      if (which == 1 || b) {
        attention_internal::paged_attention_with_path(attention_internal::AttnPath::kAvx512, kv, layer, q.data(),
                                                      kHeads, scale, seq, pos, o, &pool);
      } else {
        attention_internal_old::paged_attention_with_path(attention_internal_old::AttnPath::kAvx512, kv, layer,
                                                          q.data(), kHeads, scale, seq, pos, o, &pool);
      }
      return;
    }
    pool.parallel_for_dynamic(kKvHeads, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        const int64_t off = h * group * kHeadDim;
        if (which == 1 || b) {
          attention_internal::attend_run_amx(kv, layer, 0, ctx - nq, nq, static_cast<int>(h), q.data() + off,
                                             kHeads * kHeadDim, group, scale, o + off);
        } else {
          attention_internal_old::attend_run_amx(kv, layer, 0, ctx - nq, nq, static_cast<int>(h), q.data() + off,
                                                 kHeads * kHeadDim, group, scale, o + off);
        }
      }
    });
  };
  call(0, 0);
  call(1, 0);
  double max_diff = 0;
  for (size_t i = 0; i < q.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(out[0][i] - out[1][i])));

  constexpr int kCallsPerRound = 200;
  std::vector<double> ratios;
  double total[2] = {0, 0};
  int layer = 0;
  for (int r = 0; r < rounds; ++r) {
    double t[2] = {0, 0};
    for (int i = 0; i < kCallsPerRound; ++i) {
      for (int k = 0; k < 2; ++k) {
        const int which = (k + i) % 2;
        const auto t0 = std::chrono::steady_clock::now();
        call(which, layer);
        t[which] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!same) layer = (layer + 1) % layers;
      }
    }
    ratios.push_back(t[1] / t[0]);
    total[0] += t[0];
    total[1] += t[1];
  }
  std::sort(ratios.begin(), ratios.end());
  const double per = 1e6 / (double(rounds) * kCallsPerRound);
  std::printf("%s ctx %d nq %d kv %d threads %d same %d pages %d/%d: old %.1f us new %.1f us, new/old median %.3f "
              "[%.3f .. %.3f], max |new - old| %.3g\n",
              avx512 ? "avx512" : "amx", ctx, nq, kv_setup, threads, same ? 1 : 0, ps, ps2, total[0] * per, total[1] * per,
              ratios[ratios.size() / 2], ratios.front(), ratios.back(), max_diff);
  return 0;
}
