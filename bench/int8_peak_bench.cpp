// Int8 compute peak of this CPU's two int8 dot-product units, the ceiling a prefill GEMM's
// achieved GOPS is measured against (the compute roofline beside membw_bench's bandwidth one):
//  - vnni: 12 independent vpdpbusd chains on zmm registers (64 multiply-adds each);
//  - amx: 4 independent tdpbssd on full 16 x 64 tiles (16,384 multiply-adds each), where
//    AMX-INT8 is granted (cpu_use_amx() and cpu_has_amx_int8());
//  - avx2: 12 independent vpmaddubsw + vpaddw chains on ymm registers (32 multiply-adds each,
//    added in int16): the densest int8 form without AVX-512, the one the AVX2 INT4 tile kernel
//    runs.
// And the floating-point units the other formats' GEMMs run on, for their rooflines:
//  - bf16_peak/avx512: 12 independent vdpbf16ps chains (32 bf16 multiply-adds each): FP8 and
//    BF16 weights on AVX-512 without AMX;
//  - fp32_peak/avx512: 12 independent vfmadd231ps chains (16 each): BF16 / F16 weights with
//    fp32 activations;
//  - bf16_peak/amx: 4 independent tdpbf16ps on full tiles (16 x 16 x 32 each), where AMX-BF16
//    is granted.
// And vnni_group/*: the VNNI GEMM's group step in four forms (see vnni_group_loop), for what bounds
// that kernel (docs/performance/kernels.md).
// GOPS counts a multiply-add as 2 operations; with ->Threads(2) the counter sums both threads.
//
//   ./build/int8_peak_bench --benchmark_min_time=1
// GCC 12 false positives on the intrinsics' placeholders (see src/kernels/matmul/matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <cstdint>

#include "core/cpu_features.h"
#include "kernels/internal/amx_tile.h"

namespace densa {
namespace {

constexpr int kChains = 12;

__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) int32_t vnni_loop(int64_t iters, int8_t seed) {
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i a = _mm512_set1_epi8(seed), b = _mm512_set1_epi8(static_cast<char>(seed + 2));
  __asm__ volatile("" : "+v"(a), "+v"(b));  // not constants to the compiler
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, acc[i]);
  return _mm512_reduce_add_epi32(s);
}

__attribute__((target("avx2"), noinline)) int32_t avx2_loop(int64_t iters, int8_t seed) {
  __m256i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi16(static_cast<int16_t>(i));
  __m256i a = _mm256_set1_epi8(seed), b = _mm256_set1_epi8(static_cast<char>(seed + 2));
  __asm__ volatile("" : "+v"(a), "+v"(b));  // not constants to the compiler
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_add_epi16(acc[i], _mm256_maddubs_epi16(a, b));
  }
  __m256i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_epi16(s, acc[i]);
  return _mm256_extract_epi16(s, 0);
}

// 12 independent chains of vdpbf16ps (kBf16) or vfmadd231ps on zmm registers.
template <bool kBf16>
__attribute__((target("avx512f,avx512bf16"), noinline)) float float_loop(int64_t iters, int8_t seed) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  // bf16 1 + a little and 0.5 as 32 pairs (kBf16), or fp32 1 + a little and 0.5.
  __m512i a = kBf16 ? _mm512_set1_epi16(static_cast<int16_t>(0x3f80 + seed))
                    : _mm512_castps_si512(_mm512_set1_ps(1.0f + static_cast<float>(seed) * 0x1p-20f));
  __m512i b = kBf16 ? _mm512_set1_epi16(0x3f00) : _mm512_castps_si512(_mm512_set1_ps(0.5f));
  __asm__ volatile("" : "+v"(a), "+v"(b));  // not constants to the compiler
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) {
      if constexpr (kBf16) {
        acc[i] = _mm512_dpbf16_ps(acc[i], reinterpret_cast<const __m512bh&>(a), reinterpret_cast<const __m512bh&>(b));
      } else {
        acc[i] = _mm512_fmadd_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), acc[i]);
      }
    }
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

const kernels_internal::AmxTileConfig& full_tiles() {
  static const kernels_internal::AmxTileConfig cfg = [] {
    kernels_internal::AmxTileConfig c;
    for (int t = 0; t < 8; ++t) c.set(t, 16, 64);
    return c;
  }();
  return cfg;
}

// 4 independent tile products on full tiles: tdpbf16ps (kBf16) or tdpbssd.
template <bool kBf16>
__attribute__((target("avx512f,amx-tile,amx-int8,amx-bf16"), noinline)) int32_t amx_loop(int64_t iters, int8_t seed) {
  alignas(64) uint16_t src[512];  // bf16 near 1, or int8 bytes
  for (int i = 0; i < 512; ++i) src[i] = static_cast<uint16_t>(0x3f80 + (seed + i) % 7);
  alignas(64) int32_t out[256];
  _tile_loadconfig(&full_tiles());
  DENSA_MEMORY_BARRIER();
  _tile_loadd(4, src, 64);
  _tile_loadd(5, src, 64);
  _tile_loadd(6, src, 64);
  _tile_loadd(7, src, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t it = 0; it < iters; ++it) {
    if constexpr (kBf16) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    } else {
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  }
  _tile_stored(0, out, 64);
  _tile_release();
  DENSA_MEMORY_BARRIER();
  return out[0];
}

// The VNNI GEMM's group step (kernels/internal/tiles16_amx.h, INT8 tiles) on data in L1, to see
// what bounds it. Per group: each tile's 8 code vectors and 16 f16 scales loaded, then per x row
// (4 rows) 8 vpdpbusd of x 4 bytes at a time in two chains, and the conversion, the multiply of
// the scales by the row's x scale and the fma. kMode:
//   0 one tile, x broadcast from memory inside each vpdpbusd (the one-tile kernel);
//   1 as 0 with one more broadcast load per row and group (one load more, nothing else);
//   2 one tile, x from one 16-byte load per 4 columns' chunk of 4 and vpshufd (shuffles, not loads);
//   3 two tiles, each x broadcast loaded once into a register that both tiles' vpdpbusd read;
//   4 as 3 with one chain of 8 per (row, tile) started from a broadcast sum start, as the
//     kernel's pair runs (against 3: what the chains' shape and the starts cost).
// GOPS counts 2 per multiply-add of the vpdpbusd.
constexpr int kGroupRows = 4, kGroupSteps = 64;
alignas(64) uint8_t g_group_codes[2][kGroupSteps][512];
alignas(64) uint16_t g_group_scales[2][kGroupSteps][16];
alignas(64) int32_t g_group_x[kGroupSteps][kGroupRows][8];
alignas(64) float g_group_xs[kGroupSteps][kGroupRows];
alignas(64) int32_t g_group_start[kGroupSteps][kGroupRows];

template <int kMode>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c"), noinline)) float vnni_group_loop(int64_t iters,
                                                                                                      int8_t seed) {
  constexpr int NT = kMode >= 3 ? 2 : 1;
  __m512 acc[kGroupRows][NT];
  for (int t = 0; t < kGroupRows; ++t)
    for (int k = 0; k < NT; ++k) acc[t][k] = _mm512_set1_ps(static_cast<float>(seed));
  for (int64_t it = 0; it < iters; ++it) {
    const int64_t g = it % kGroupSteps;
    __m512i w[NT][8];
    __m512 ws[NT];
    for (int k = 0; k < NT; ++k) {
      for (int j = 0; j < 8; ++j) w[k][j] = _mm512_load_si512(g_group_codes[k][g] + 64 * j);
      ws[k] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(g_group_scales[k][g])));
    }
#pragma GCC unroll 4
    for (int t = 0; t < kGroupRows; ++t) {
      const int32_t* x = g_group_x[g][t];
      __m512i s0[NT], s1[NT];
      for (int k = 0; k < NT; ++k) s0[k] = s1[k] = _mm512_setzero_si512();
      if constexpr (kMode == 4) {
        for (int k = 0; k < NT; ++k) s0[k] = _mm512_set1_epi32(g_group_start[g][t]);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          __m512i b0, b1;
          __asm__("vpbroadcastd %1, %0" : "=v"(b0) : "m"(x[j]));
          __asm__("vpbroadcastd %1, %0" : "=v"(b1) : "m"(x[j + 4]));
          for (int k = 0; k < NT; ++k) s0[k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s0[k], w[k][j], b0), w[k][j + 4], b1);
        }
      } else if constexpr (kMode == 2) {
        const __m512i lo = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(x)));
        const __m512i hi = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(x + 4)));
        s0[0] = _mm512_dpbusd_epi32(s0[0], w[0][0], _mm512_shuffle_epi32(lo, _MM_PERM_AAAA));
        s1[0] = _mm512_dpbusd_epi32(s1[0], w[0][4], _mm512_shuffle_epi32(hi, _MM_PERM_AAAA));
        s0[0] = _mm512_dpbusd_epi32(s0[0], w[0][1], _mm512_shuffle_epi32(lo, _MM_PERM_BBBB));
        s1[0] = _mm512_dpbusd_epi32(s1[0], w[0][5], _mm512_shuffle_epi32(hi, _MM_PERM_BBBB));
        s0[0] = _mm512_dpbusd_epi32(s0[0], w[0][2], _mm512_shuffle_epi32(lo, _MM_PERM_CCCC));
        s1[0] = _mm512_dpbusd_epi32(s1[0], w[0][6], _mm512_shuffle_epi32(hi, _MM_PERM_CCCC));
        s0[0] = _mm512_dpbusd_epi32(s0[0], w[0][3], _mm512_shuffle_epi32(lo, _MM_PERM_DDDD));
        s1[0] = _mm512_dpbusd_epi32(s1[0], w[0][7], _mm512_shuffle_epi32(hi, _MM_PERM_DDDD));
      } else {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          if constexpr (NT == 1) {
            __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s0[0]) : "v"(w[0][j]), "m"(x[j]));
            __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s1[0]) : "v"(w[0][j + 4]), "m"(x[j + 4]));
          } else {
            __m512i b0, b1;
            __asm__("vpbroadcastd %1, %0" : "=v"(b0) : "m"(x[j]));
            __asm__("vpbroadcastd %1, %0" : "=v"(b1) : "m"(x[j + 4]));
            for (int k = 0; k < NT; ++k) {
              s0[k] = _mm512_dpbusd_epi32(s0[k], w[k][j], b0);
              s1[k] = _mm512_dpbusd_epi32(s1[k], w[k][j + 4], b1);
            }
          }
        }
      }
      if constexpr (kMode == 1) {
        __m512i extra;
        __asm__("vpbroadcastd %1, %0" : "=v"(extra) : "m"(x[1]));
        s1[0] = _mm512_add_epi32(s1[0], extra);
      }
      const __m512 xs = _mm512_set1_ps(g_group_xs[g][t]);
      for (int k = 0; k < NT; ++k) {
        const __m512i sum = kMode == 4 ? s0[k] : _mm512_add_epi32(s0[k], s1[k]);
        acc[t][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(ws[k], xs), acc[t][k]);
      }
    }
  }
  __m512 s = _mm512_setzero_ps();
  for (int t = 0; t < kGroupRows; ++t)
    for (int k = 0; k < NT; ++k) s = _mm512_add_ps(s, acc[t][k]);
  return _mm512_reduce_add_ps(s);
}

// Runs loop(iters, seed) per iteration, counting ops_per_iter operations per loop iteration, or
// skips with `missing` where `available` is false.
template <typename Loop>
void run_peak(benchmark::State& state, bool available, const char* missing, Loop loop, int64_t iters,
              int64_t ops_per_iter) {
  if (!available) {
    state.SkipWithError(missing);
    return;
  }
  int64_t ops = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(loop(iters, 1));
    ops += iters * ops_per_iter;
  }
  state.counters["GOPS"] = benchmark::Counter(static_cast<double>(ops) / 1e9, benchmark::Counter::kIsRate);
}

void BM_vnni(benchmark::State& state) {
  run_peak(state, static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16),
           "no AVX-512 VNNI", vnni_loop, int64_t{1} << 16, kChains * 64 * 2);
}

void BM_amx(benchmark::State& state) {
  run_peak(state, cpu_use_amx() && cpu_has_amx_int8(), "no AMX-INT8 granted", amx_loop<false>, int64_t{1} << 12,
           4 * 16 * 16 * 64 * 2);
}

void BM_bf16(benchmark::State& state) {
  run_peak(state, static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16),
           "no AVX-512 BF16", float_loop<true>, int64_t{1} << 16, kChains * 32 * 2);
}

void BM_fp32(benchmark::State& state) {
  run_peak(state, static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16), "no AVX-512",
           float_loop<false>, int64_t{1} << 16, kChains * 16 * 2);
}

void BM_amx_bf16(benchmark::State& state) {
  run_peak(state, cpu_use_amx() && cpu_has_amx_bf16(), "no AMX-BF16 granted", amx_loop<true>, int64_t{1} << 12,
           4 * 16 * 16 * 32 * 2);
}

void BM_avx2(benchmark::State& state) {
  run_peak(state, static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx2), "no AVX2", avx2_loop,
           int64_t{1} << 16, kChains * 32 * 2);
}

template <int kMode>
void BM_vnni_group(benchmark::State& state) {
  run_peak(state, static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16),
           "no AVX-512 VNNI", vnni_group_loop<kMode>, int64_t{1} << 14, (kMode >= 3 ? 2 : 1) * kGroupRows * 8 * 64 * 2);
}

BENCHMARK(BM_vnni)->Name("int8_peak/vnni")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_avx2)->Name("int8_peak/avx2")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_amx)->Name("int8_peak/amx")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_bf16)->Name("bf16_peak/avx512")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_fp32)->Name("fp32_peak/avx512")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_amx_bf16)->Name("bf16_peak/amx")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_vnni_group<0>)->Name("vnni_group/tiles:1")->Threads(1)->UseRealTime();
BENCHMARK(BM_vnni_group<1>)->Name("vnni_group/tiles:1/one_more_load")->Threads(1)->UseRealTime();
BENCHMARK(BM_vnni_group<2>)->Name("vnni_group/tiles:1/x_by_vpshufd")->Threads(1)->UseRealTime();
BENCHMARK(BM_vnni_group<3>)->Name("vnni_group/tiles:2")->Threads(1)->UseRealTime();
BENCHMARK(BM_vnni_group<4>)->Name("vnni_group/tiles:2/one_chain_from_start")->Threads(1)->UseRealTime();

}  // namespace
}  // namespace densa

BENCHMARK_MAIN();
