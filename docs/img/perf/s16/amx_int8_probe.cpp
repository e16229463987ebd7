// Throwaway probe (session 16): is an exact per-group INT8 GEMM on AMX worth building, and do
// the AMX and AVX-512 forms of it give the same bits?
//
// The arithmetic (W8A8 as densa's Q8_0 path: x quantized to int8 per 32 columns): per output
// (token t, weight row n), per 32-column group g in order,
//   S = exact int32 sum of w * x over the group,
//   acc = fma(float(S), w_scale[n][g] * x_scale[t][g], acc).
//  - amx:    C tile = tdpbsud(x tile 16 tokens x 32 columns, weight tile 16 rows x 32 columns
//            in VNNI order), one C tile per group, then a vector epilogue per token row
//            (lane = weight row). amx2 issues the next group's tile product before this
//            group's epilogue (two C tiles). amx4: the weights as signed codes on tdpbssd (no
//            offset to remove), four groups' tile products into four C tiles, then their
//            epilogues.
//  - vnni:   the same sums on AVX-512 VNNI with the same VNNI-ordered weights: eight vpdpbusd
//            per group with x broadcast 4 bytes at a time, lane = weight row.
// Both start S from the weight offset correction (weights stored as code + 128), so S is exact
// and the fp32 operations are the same sequence: the outputs must agree bit for bit.
//
// Build: g++ -O3 -std=c++20 -march=sapphirerapids docs/img/perf/s16/amx_int8_probe.cpp -o /tmp/amx_int8_probe
// Run:   /tmp/amx_int8_probe [rounds]   (one thread; prints GFLOP/s per kernel per round)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kK = 2048, kG = kK / 32;

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

struct Problem {
  int m, n;                  // tokens, weight rows (n % 16 == 0, m % 16 == 0)
  std::vector<int8_t> x;     // [m][K]
  std::vector<float> xs;     // [m][G]
  std::vector<int32_t> xc;   // [m][G]: 128 * sum of x over the group
  std::vector<uint8_t> wp;   // per (16-row block, group): 512 bytes in VNNI order, code + 128
  std::vector<int8_t> wq;    // the same codes, signed (code = wp - 128), for tdpbssd
  std::vector<float> wsp;    // per (16-row block, group): 16 fp32 scales
};

Problem make(int m, int n) {
  Problem p{m, n, {}, {}, {}, {}, {}};
  uint32_t s = 12345;
  auto rnd = [&] { s = s * 1664525u + 1013904223u; return s >> 8; };
  p.x.resize(size_t(m) * kK);
  for (auto& v : p.x) v = static_cast<int8_t>(int(rnd() % 255) - 127);
  p.xs.resize(size_t(m) * kG);
  p.xc.resize(size_t(m) * kG);
  for (int t = 0; t < m; ++t)
    for (int g = 0; g < kG; ++g) {
      p.xs[t * kG + g] = 0.001f + float(rnd() % 1000) * 1e-5f;
      int32_t sum = 0;
      for (int k = 0; k < 32; ++k) sum += p.x[size_t(t) * kK + g * 32 + k];
      p.xc[t * kG + g] = 128 * sum;
    }
  p.wp.resize(size_t(n) * kK);
  p.wsp.resize(size_t(n) * kG);
  for (int nb = 0; nb < n / 16; ++nb)
    for (int g = 0; g < kG; ++g) {
      uint8_t* b = &p.wp[(size_t(nb) * kG + g) * 512];
      for (int r = 0; r < 16; ++r)
        for (int k = 0; k < 32; ++k) b[(k / 4) * 64 + r * 4 + k % 4] = static_cast<uint8_t>(rnd() % 256);
      for (int r = 0; r < 16; ++r) p.wsp[(size_t(nb) * kG + g) * 16 + r] = 0.002f + float(rnd() % 1000) * 1e-6f;
    }
  p.wq.resize(p.wp.size());
  for (size_t i = 0; i < p.wp.size(); ++i) p.wq[i] = static_cast<int8_t>(int(p.wp[i]) - 128);
  return p;
}

void amx_config() {
  TileConfig c;
  for (int t : {0, 1, 6, 7}) { c.rows[t] = 16; c.colsb[t] = 64; }  // C
  for (int t : {2, 3}) { c.rows[t] = 16; c.colsb[t] = 32; }  // A: x, 16 tokens x 32 columns
  for (int t : {4, 5}) { c.rows[t] = 8; c.colsb[t] = 64; }   // B: weights, 8 x (16 rows x 4)
  _tile_loadconfig(&c);
}

inline void epilogue(const int32_t* cbuf, const Problem& p, int t0, int g, __m512 ws, __m512 (&acc)[16]) {
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) {
    const __m512i s = _mm512_sub_epi32(_mm512_load_si512(cbuf + 16 * t), _mm512_set1_epi32(p.xc[(t0 + t) * kG + g]));
    const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(p.xs[(t0 + t) * kG + g]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[t]);
  }
}

__attribute__((noinline)) void gemm_amx(const Problem& p, float* y) {
  alignas(64) int32_t cbuf[256];
  for (int nb = 0; nb < p.n / 16; ++nb)
    for (int t0 = 0; t0 < p.m; t0 += 16) {
      __m512 acc[16];
      for (auto& a : acc) a = _mm512_setzero_ps();
      for (int g = 0; g < kG; ++g) {
        _tile_loadd(2, &p.x[size_t(t0) * kK + g * 32], kK);
        _tile_loadd(4, &p.wp[(size_t(nb) * kG + g) * 512], 64);
        _tile_zero(0);
        _tile_dpbsud(0, 2, 4);
        _tile_stored(0, cbuf, 64);
        epilogue(cbuf, p, t0, g, _mm512_loadu_ps(&p.wsp[(size_t(nb) * kG + g) * 16]), acc);
      }
      for (int t = 0; t < 16; ++t) _mm512_storeu_ps(y + size_t(t0 + t) * p.n + nb * 16, acc[t]);
    }
}

__attribute__((noinline)) void gemm_amx2(const Problem& p, float* y) {
  alignas(64) int32_t cbuf[2][256];
  for (int nb = 0; nb < p.n / 16; ++nb)
    for (int t0 = 0; t0 < p.m; t0 += 16) {
      __m512 acc[16];
      for (auto& a : acc) a = _mm512_setzero_ps();
      _tile_loadd(2, &p.x[size_t(t0) * kK], kK);
      _tile_loadd(4, &p.wp[size_t(nb) * kG * 512], 64);
      _tile_zero(0);
      _tile_dpbsud(0, 2, 4);
      _tile_stored(0, cbuf[0], 64);
      for (int g = 0; g < kG; g += 2) {
        if (g + 1 < kG) {  // group g + 1 into tile 1 while the vectors finish group g
          _tile_loadd(3, &p.x[size_t(t0) * kK + (g + 1) * 32], kK);
          _tile_loadd(5, &p.wp[(size_t(nb) * kG + g + 1) * 512], 64);
          _tile_zero(1);
          _tile_dpbsud(1, 3, 5);
        }
        epilogue(cbuf[0], p, t0, g, _mm512_loadu_ps(&p.wsp[(size_t(nb) * kG + g) * 16]), acc);
        if (g + 1 < kG) {
          _tile_stored(1, cbuf[1], 64);
          if (g + 2 < kG) {
            _tile_loadd(2, &p.x[size_t(t0) * kK + (g + 2) * 32], kK);
            _tile_loadd(4, &p.wp[(size_t(nb) * kG + g + 2) * 512], 64);
            _tile_zero(0);
            _tile_dpbsud(0, 2, 4);
          }
          epilogue(cbuf[1], p, t0, g + 1, _mm512_loadu_ps(&p.wsp[(size_t(nb) * kG + g + 1) * 16]), acc);
          if (g + 2 < kG) _tile_stored(0, cbuf[0], 64);
        }
      }
      for (int t = 0; t < 16; ++t) _mm512_storeu_ps(y + size_t(t0 + t) * p.n + nb * 16, acc[t]);
    }
}

// Signed weights on tdpbssd (no offset to remove), four groups' tile products issued together
// into C tiles 0, 1, 6, 7, then their four epilogues. Same sums, same fp32 sequence.
inline void epilogue_signed(const int32_t* cbuf, const Problem& p, int t0, int g, __m512 ws, __m512 (&acc)[16]) {
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) {
    const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(p.xs[(t0 + t) * kG + g]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cbuf + 16 * t)), scale, acc[t]);
  }
}

__attribute__((noinline)) void gemm_amx4(const Problem& p, float* y) {
  alignas(64) int32_t cbuf[4][256];
  for (int nb = 0; nb < p.n / 16; ++nb)
    for (int t0 = 0; t0 < p.m; t0 += 16) {
      __m512 acc[16];
      for (auto& a : acc) a = _mm512_setzero_ps();
      const int8_t* x = &p.x[size_t(t0) * kK];
      const int8_t* w = &p.wq[size_t(nb) * kG * 512];
      for (int g = 0; g < kG; g += 4) {
        _tile_zero(0); _tile_zero(1); _tile_zero(6); _tile_zero(7);
        _tile_loadd(2, x + g * 32, kK); _tile_loadd(4, w + g * 512, 64); _tile_dpbssd(0, 2, 4);
        _tile_loadd(3, x + (g + 1) * 32, kK); _tile_loadd(5, w + (g + 1) * 512, 64); _tile_dpbssd(1, 3, 5);
        _tile_loadd(2, x + (g + 2) * 32, kK); _tile_loadd(4, w + (g + 2) * 512, 64); _tile_dpbssd(6, 2, 4);
        _tile_loadd(3, x + (g + 3) * 32, kK); _tile_loadd(5, w + (g + 3) * 512, 64); _tile_dpbssd(7, 3, 5);
        _tile_stored(0, cbuf[0], 64); _tile_stored(1, cbuf[1], 64);
        _tile_stored(6, cbuf[2], 64); _tile_stored(7, cbuf[3], 64);
        for (int j = 0; j < 4; ++j)
          epilogue_signed(cbuf[j], p, t0, g + j, _mm512_loadu_ps(&p.wsp[(size_t(nb) * kG + g + j) * 16]), acc);
      }
      for (int t = 0; t < 16; ++t) _mm512_storeu_ps(y + size_t(t0 + t) * p.n + nb * 16, acc[t]);
    }
}

// AVX-512 VNNI on the same layout; T tokens at a time share the eight weight vectors.
template <int T>
__attribute__((noinline)) void gemm_vnni(const Problem& p, float* y) {
  for (int nb = 0; nb < p.n / 16; ++nb)
    for (int t0 = 0; t0 < p.m; t0 += T) {
      __m512 acc[T];
      for (auto& a : acc) a = _mm512_setzero_ps();
      for (int g = 0; g < kG; ++g) {
        const uint8_t* b = &p.wp[(size_t(nb) * kG + g) * 512];
        __m512i w[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) w[j] = _mm512_loadu_si512(b + 64 * j);
        const __m512 ws = _mm512_loadu_ps(&p.wsp[(size_t(nb) * kG + g) * 16]);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const int8_t* xg = &p.x[size_t(t0 + t) * kK + g * 32];
          __m512i s0 = _mm512_set1_epi32(-p.xc[(t0 + t) * kG + g]), s1 = _mm512_setzero_si512();
          int32_t xw[8];
          std::memcpy(xw, xg, 32);
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) {
            s0 = _mm512_dpbusd_epi32(s0, w[j], _mm512_set1_epi32(xw[j]));
            s1 = _mm512_dpbusd_epi32(s1, w[j + 4], _mm512_set1_epi32(xw[j + 4]));
          }
          const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(p.xs[(t0 + t) * kG + g]));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), scale, acc[t]);
        }
      }
      for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + size_t(t0 + t) * p.n + nb * 16, acc[t]);
    }
}

double seconds(void (*f)(const Problem&, float*), const Problem& p, float* y, int reps) {
  f(p, y);
  const auto a = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) f(p, y);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) {
    std::fprintf(stderr, "no AMX tile permission\n");
    return 1;
  }
  amx_config();
  // Prefill-sized: 512 tokens through a 7168 x 2048 matrix (gemv_bench's gemm/n:512 shape);
  // decode-sized: 1 token through 1024 x 2048 in cache (the GEMV's compute ceiling).
  const Problem big = make(512, 7168), hot = make(16, 1024);
  std::vector<float> ya(size_t(big.m) * big.n), yb(ya.size()), yc(ya.size()), yd(ya.size()), ye(ya.size());
  gemm_amx(big, ya.data());
  gemm_amx4(big, ye.data());
  gemm_amx2(big, yb.data());
  gemm_vnni<4>(big, yc.data());
  gemm_vnni<1>(big, yd.data());
  const bool same = std::memcmp(ya.data(), yb.data(), ya.size() * 4) == 0 &&
                    std::memcmp(ya.data(), yc.data(), ya.size() * 4) == 0 &&
                    std::memcmp(ya.data(), yd.data(), ya.size() * 4) == 0 &&
                    std::memcmp(ya.data(), ye.data(), ya.size() * 4) == 0;
  std::printf("outputs bit-identical across amx, amx2, amx4, vnni<4>, vnni<1>: %s\n", same ? "yes" : "NO");
  const double flop = 2.0 * big.m * big.n * kK, hot_flop = 2.0 * 1 * hot.n * kK;
  std::vector<float> yh(size_t(hot.m) * hot.n);
  for (int r = 0; r < rounds; ++r) {
    const double a = seconds(gemm_amx, big, ya.data(), 3), b = seconds(gemm_amx2, big, yb.data(), 3),
                 c = seconds(gemm_vnni<4>, big, yc.data(), 3), e = seconds(gemm_amx4, big, ye.data(), 3);
    // GEMV: one token (the first row of `hot`), m forced to... run the T=1 kernel on a 1-token view.
    Problem one = hot;
    one.m = 1;
    const double d = seconds(gemm_vnni<1>, one, yh.data(), 2000);
    std::printf("round %d: gemm 512x7168x2048 GFLOP/s: amx %.0f, amx2 %.0f, amx4 (signed) %.0f, vnni(4 tokens) %.0f; "
                "gemv 1024x2048 in cache: vnni %.1f weight GB/s\n",
                r + 1, flop / a / 1e9, flop / b / 1e9, flop / e / 1e9, flop / c / 1e9, double(hot.n) * kK / d / 1e9);
    (void)hot_flop;
  }
}
