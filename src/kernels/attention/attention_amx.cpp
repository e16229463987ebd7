// Paged attention on AMX tiles (CPUs with AMX-BF16, cpu_use_amx()), for BF16 and FP8 e4m3
// caches with head_dim % 32 == 0. One work item is the `group` query heads of one kv head for a
// run of nq consecutive tokens of one sequence (see attend_run in attention.cpp); its (query,
// head) pairs are served up to kMaxCols at a time, in three passes over the context:
//
//  1. Scores. A tile = 16 K rows x 32 of their dims (BF16: read straight from the page when a
//     page holds whole 16-position tiles; FP8: decoded exactly to bf16 by a table), B tile = the
//     same 32 dims of each pair's q x scale in the VNNI pairs tdpbf16ps reads, as two bf16 parts
//     (hi = bf16(q) in column n, lo = bf16(q - hi) in column half + n), so q keeps ~16 bits. The
//     columns of the stored C tile are gathered (vpermt2ps even / odd splits), hi + lo, times the
//     rows' K scales (FP8), into per-pair rows of a score buffer.
//  2. Softmax per pair over its own positions 0 .. pos: max, exp, sum (16 lanes in order, then
//     a fixed tree), the probabilities stored in place, zero past pos.
//  3. Values. A tile = the pairs' weights (probability x the row's V scale) for 32 positions as
//     hi and lo bf16 rows; B tile = 16 dims of the 32 V rows interleaved in position pairs
//     (unpacklo / unpackhi of two rows: dims come out in a fixed permutation that the output
//     store undoes); one C tile per 16 dims sums over the whole context. Rows past the last
//     position are zero in the B buffer.
// Both context loops are software-pipelined: the next pass's buffers are filled while the tile
// unit works on this one's.
//
// An item of more than kMaxCols pairs (a prefill run of several tokens) runs the three passes
// once per kMaxCols pairs. It decodes its K rows (FP8, or pages not holding whole tiles) and
// builds its value B tiles once, up front, and each round reads those: the same bytes, so the
// same bits as an item of one round (up to kMaxKeptBytes per thread; a longer context builds
// them in every round).
//
// Batch invariance: every C element depends only on its own A row and B column, so a pair's
// scores, softmax and weighted sum are the same operations on the same values whatever else
// shares the tiles (other heads, other queries of a run, fewer or more columns). Weights of
// positions after a query's own are exactly 0; their V rows are the run's own finite values.
// (A non-finite V row at a later position of the same run would turn 0 x inf into NaN for the
// earlier queries; that row already makes its own token's output NaN.)
//
// Numerics differ from the AVX-512 path (one softmax over the whole context instead of an
// online one per tile, q and the weights in two bf16 parts), so a process uses one path per
// layout (paged_attention). Error against fp32 attention on the held values: hi + lo is within
// 2^-16 of q and of each weight, products are exact in fp32, sums in fp32; the test states
// the bound (amx_bounds in tests/kernels/attention_test.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <atomic>
#include <limits>
#include <tuple>

#include "kernels/internal/attention_amx_rows.h"

namespace densa::attention_internal {
namespace {

// An item of several passes (a prefill run: more (query, head) pairs than kMaxCols) decodes its K
// and V rows once for all passes when they take at most this many bytes as bf16 (per thread).
constexpr int64_t kMaxKeptBytes = 8ll << 20;
std::atomic<int64_t> g_kept_limit{kMaxKeptBytes};  // amx_attention_set_kept_limit

// One work item's facts and buffers, shared by its passes (attend_run_amx).
struct AmxItem {
  const RunRows& rr;
  AmxAttnScratch& sc;
  const float* q;
  int64_t q_stride;
  int group;
  float scale;
  float* out;
  int32_t pos0;
  int32_t last;
  int hd;
  int chunks;
  bool fp8;
  int64_t s_stride;
  float* s;
  // The rows decoded once for every round (keep_rows; null when each round builds its own):
  // K rows as bf16 when keep_k, value B tiles of `groups` 64-dim groups per step, their scales.
  bool keep_k;
  int groups;
  uint8_t* kept_k;
  uint8_t* kept_v;
  float* kept_ks;
  float* kept_vs;
};

// Where pair n of the round from c0 reads q and writes its output.
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE int64_t pair_offset(const AmxItem& it, int c0, int n) {
  return ((c0 + n) / it.group) * it.q_stride + static_cast<int64_t>((c0 + n) % it.group) * it.hd;
}

// Several rounds read the same rows: decode them once into bf16 K rows (FP8, or pages that do
// not hold whole tiles; other BF16 pages are read in place) and value B tiles, the same bytes
// each round would build, so the result is the same bit for bit.
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void keep_rows(const AmxItem& it, int64_t steps) {
  const RunRows& rr = it.rr;
  for (int64_t i = 0; i < steps; ++i) {
    const int32_t u0 = static_cast<int32_t>(i * kStep);
    // K too when it is read in place (BF16 pages of whole tiles): this loop does not read it,
    // but the first score pass then finds it in cache (skipping it made a 16-token BF16 run
    // at 4,096 positions slower in an interleaved kernel A/B).
    rr.prefetch_rows(0, u0 + 16 * kAheadTiles, kStep);
    rr.prefetch_rows(1, u0 + 16 * kAheadTiles, kStep);
    if (it.keep_k) {
      int64_t stride = 0;
      for (int32_t t0 = u0; t0 < u0 + kStep && t0 <= it.last; t0 += 16) {
        rr.k_tile(t0, it.kept_k + t0 * 2 * it.hd, stride, it.kept_ks + t0);
      }
    }
    for (int g = 0; g < it.groups; ++g) {
      build_value_b(rr, u0, 64 * g, it.kept_v + (i * it.groups + g) * 4 * kAmxTileBytes, it.kept_vs + u0);
    }
  }
}

// q x scale of each of the P pairs from c0 in the B tile of each 32-dim chunk: row k holds, per
// column, the bf16 pair of dims (32 c + 2 k, 32 c + 2 k + 1), so a column is the chunk's 32 bf16
// of q; pair n's hi part in column n, its lo part in column half + n.
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void load_q_pairs(const AmxItem& it, int c0, int P, int half) {
  std::memset(it.sc.qb, 0, static_cast<size_t>(it.chunks) * kAmxTileBytes);
  for (int n = 0; n < P; ++n) {
    const float* qn = it.q + pair_offset(it, c0, n);
    for (int ch = 0; ch < it.chunks; ++ch) {
      alignas(64) uint32_t parts[2][16];
      split_bf16(_mm512_mul_ps(_mm512_loadu_ps(qn + 32 * ch), _mm512_set1_ps(it.scale)),
                 _mm512_mul_ps(_mm512_loadu_ps(qn + 32 * ch + 16), _mm512_set1_ps(it.scale)), parts[0], parts[1]);
      uint32_t* t = reinterpret_cast<uint32_t*>(it.sc.qb + ch * kAmxTileBytes);
      for (int k = 0; k < 16; ++k) {
        t[16 * k + n] = parts[0][k];
        t[16 * k + half + n] = parts[1][k];
      }
    }
  }
}

// Pass 1: the scores of P pairs (pp score columns) over the whole context, two 16-position
// tiles at a time, into it.s.
template <bool Keep>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void score_pass(const AmxItem& it, int P, int pp) {
  const RunRows& rr = it.rr;
  AmxAttnScratch& sc = it.sc;
  const int hd = it.hd, chunks = it.chunks;
  const int32_t last = it.last;
  const bool keep_k = it.keep_k, fp8 = it.fp8;
  const uint8_t* kept_k = it.kept_k;
  const float* kept_ks = it.kept_ks;
  float* s = it.s;
  const int64_t s_stride = it.s_stride;
  AmxTileConfig cfg1;
  cfg1.set(0, 16, 4 * pp);                                  // C: 16 positions x pp columns
  cfg1.set(1, 16, 4 * pp);
  cfg1.set(2, 16, 64);                                      // A: 16 K rows x 32 dims
  cfg1.set(7, 16, 64);
  for (int t = 3; t < 7; ++t) cfg1.set(t, 16, 4 * pp);      // B: q, one chunk each
  _tile_loadconfig(&cfg1);
  switch (chunks) {
    case 1: load_q_tiles<1>(sc.qb); break;
    case 2: load_q_tiles<2>(sc.qb); break;
    case 3: load_q_tiles<3>(sc.qb); break;
    case 4: load_q_tiles<4>(sc.qb); break;
    default: break;
  }
  // Software-pipelined: the vector units prepare the next two tiles (fp8: decode into the
  // other K buffer) and gather the previous pass's stored scores while the tile unit works on
  // these, so no tile load waits for stores just made and no vector load for a tile store.
  struct ScorePass {
    const uint8_t* a[2];
    int64_t stride;
    bool two;
    alignas(64) float kscale[2][16];
  };
  ScorePass sp[3];  // pass i: prepared in i - 1, run in i, gathered in i + 1
  auto prepare = [&rr, &sc, hd, last, keep_k, kept_k, kept_ks](int32_t t0, int buf, ScorePass& x)
                     DENSA_TARGET_AVX512_VBMI_AMX_BF16 __attribute__((always_inline)) {
    x.two = t0 + 16 <= last;
    if (Keep && keep_k) {
      x.stride = 2 * hd;
      x.a[0] = kept_k + t0 * 2 * hd;
      x.a[1] = x.two ? x.a[0] + 32 * hd : nullptr;
      _mm512_store_ps(x.kscale[0], _mm512_loadu_ps(kept_ks + t0));
      if (x.two) _mm512_store_ps(x.kscale[1], _mm512_loadu_ps(kept_ks + t0 + 16));
      return;
    }
    int64_t unused = 0;
    x.a[0] = rr.k_tile(t0, sc.kbuf + buf * 64 * hd, x.stride, x.kscale[0]);
    x.a[1] = x.two ? rr.k_tile(t0 + 16, sc.kbuf + buf * 64 * hd + 32 * hd, unused, x.kscale[1]) : nullptr;
  };
  auto gather = [&](int32_t t0, const ScorePass& x, const float* c) {
    for (int u = 0; u < (x.two ? 2 : 1); ++u) {
      gather_scores(c + 256 * u, x.kscale[u], fp8, P, pp, s + t0 + 16 * u, s_stride);
    }
  };
  prepare(0, 0, sp[0]);
  int i = 0;
  for (int32_t t0 = 0; t0 <= last; t0 += 32, ++i) {
    const ScorePass& cur = sp[i % 3];
    if (!(Keep && keep_k)) rr.prefetch_rows(0, t0 + 16 * kAheadTiles, 32);
    // K buffer (i + 1) & 1 was last read by pass i - 1's tile loads, issued before these stores.
    if (t0 + 32 <= last) prepare(t0 + 32, (i + 1) & 1, sp[(i + 1) % 3]);
    DENSA_MEMORY_BARRIER();
    float* c = sc.c + 512 * (i & 1);
    switch (chunks) {
      case 1: score_tiles<1>(cur.a[0], cur.a[1], cur.stride, sc.qb, chunks, c, pp); break;
      case 2: score_tiles<2>(cur.a[0], cur.a[1], cur.stride, sc.qb, chunks, c, pp); break;
      case 3: score_tiles<3>(cur.a[0], cur.a[1], cur.stride, sc.qb, chunks, c, pp); break;
      case 4: score_tiles<4>(cur.a[0], cur.a[1], cur.stride, sc.qb, chunks, c, pp); break;
      default: score_tiles<0>(cur.a[0], cur.a[1], cur.stride, sc.qb, chunks, c, pp); break;
    }
    DENSA_MEMORY_BARRIER();
    if (i > 0) gather(t0 - 32, sp[(i - 1) % 3], sc.c + 512 * ((i - 1) & 1));
  }
  DENSA_MEMORY_BARRIER();
  gather(32 * (i - 1), sp[(i - 1) % 3], sc.c + 512 * ((i - 1) & 1));
  DENSA_MEMORY_BARRIER();  // the loads of sc.c come before the next tile stores
}

// Pass 2: the softmax of each of the P pairs from c0 over its own positions, in place in it.s;
// l[n] = pair n's sum.
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void softmax_pass(const AmxItem& it, int c0, int P, float* l) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int n = 0; n < P; ++n) {
    float* sn = it.s + n * it.s_stride;
    const int32_t own = it.pos0 + (c0 + n) / it.group + 1;
    __m512 mx = neg_inf;
    for (int32_t t = 0; t < own; t += 16) {
      const __mmask16 m = own - t >= 16 ? static_cast<__mmask16>(0xffff)
                                        : static_cast<__mmask16>((1u << (own - t)) - 1);
      mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(neg_inf, m, sn + t));
    }
    const __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int32_t t = 0; t < own; t += 16) {
      const __mmask16 m = own - t >= 16 ? static_cast<__mmask16>(0xffff)
                                        : static_cast<__mmask16>((1u << (own - t)) - 1);
      const __m512 p = _mm512_maskz_mov_ps(m, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, sn + t), mv)));
      sum = _mm512_add_ps(sum, p);
      _mm512_storeu_ps(sn + t, p);
    }
    l[n] = _mm512_reduce_add_ps(sum);
    for (int32_t t = (own + 15) / 16 * 16; t < it.s_stride; t += 16) _mm512_storeu_ps(sn + t, _mm512_setzero_ps());
  }
}

// Pass 3: the weighted sum of the V rows for the P pairs from c0, divided by l, into their
// outputs.
template <bool Keep>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void value_pass(const AmxItem& it, int c0, int P, const float* l) {
  const RunRows& rr = it.rr;
  AmxAttnScratch& sc = it.sc;
  const int hd = it.hd, groups = it.groups;
  const int32_t last = it.last;
  const bool fp8 = it.fp8;
  const float* s = it.s;
  const int64_t s_stride = it.s_stride;
  const uint8_t* kept_v = it.kept_v;
  const float* kept_vs = it.kept_vs;
  AmxTileConfig cfg3;
  for (int t = 0; t < 5; ++t) cfg3.set(t, 2 * P, 64);  // C: 2P rows x 16 dims; A (4): 32 positions
  for (int t = 5; t < 8; ++t) cfg3.set(t, 16, 64);     // B: 16 position pairs x 16 dims
  _tile_loadconfig(&cfg3);
  for (int d0 = 0; d0 < hd; d0 += 64) {
    const int nc = hd - d0 >= 64 || fp8 ? 4 : 2;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    // Pipelined as the scores: step u + 1's A and B tiles are built in the other buffers
    // while the tile unit works on step u's (kept: only the A tile; the B tiles are built).
    const int g = d0 / 64;
    auto build_step = [&](int32_t u0, int b) DENSA_TARGET_AVX512_VBMI_AMX_BF16 __attribute__((always_inline)) {
      uint8_t* a = sc.a + b * kAmxTileBytes;
      if constexpr (Keep) {
        build_value_a(s, s_stride, P, u0, kept_vs + u0, a);
      } else {
        alignas(64) float vscale[kStep];
        build_value_b(rr, u0, d0, sc.vb + b * 4 * kAmxTileBytes, vscale);
        build_value_a(s, s_stride, P, u0, vscale, a);
      }
    };
    build_step(0, 0);
    int i = 0;
    for (int32_t u0 = 0; u0 <= last; u0 += kStep, ++i) {
      if (!Keep) rr.prefetch_rows(1, u0 + 16 * kAheadTiles, kStep);
      const int b = i & 1;
      if (u0 + kStep <= last) build_step(u0 + kStep, 1 - b);
      DENSA_MEMORY_BARRIER();
      const uint8_t* vb = Keep ? kept_v + (static_cast<int64_t>(i) * groups + g) * 4 * kAmxTileBytes
                               : sc.vb + b * 4 * kAmxTileBytes;
      nc == 4 ? value_tiles<4>(sc.a + b * kAmxTileBytes, vb) : value_tiles<2>(sc.a + b * kAmxTileBytes, vb);
    }
    _tile_stored(0, sc.c, 64);
    _tile_stored(1, sc.c + 256, 64);
    if (nc == 4) {
      _tile_stored(2, sc.c + 512, 64);
      _tile_stored(3, sc.c + 768, 64);
    }
    DENSA_MEMORY_BARRIER();
    for (int n = 0; n < P; ++n) {
      const float inv = 1.0f / l[n];
      float* o = it.out + pair_offset(it, c0, n) + d0;
      for (int c = 0; c < nc; ++c) {
        for (int m = 0; m < 16; ++m) {
          const int d = value_dim(fp8, c, m);
          if (d0 + d < hd) o[d] = (sc.c[256 * c + 16 * n + m] + sc.c[256 * c + 16 * (P + n) + m]) * inv;
        }
      }
    }
    DENSA_MEMORY_BARRIER();
  }
}

// The item's pairs in rounds of up to kMaxCols, the three passes each. Instantiated twice, so
// the decode step (one round) keeps none of the kept-rows logic in its loops.
template <bool Keep>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void passes(const AmxItem& it, int total) {
  float l[kMaxCols];
  for (int c0 = 0; c0 < total; c0 += kMaxCols) {
    const int P = std::min(kMaxCols, total - c0);
    int half = 1;
    while (half < P) half *= 2;
    const int pp = 2 * half;  // score columns: pair n's q hi part in n, lo part in half + n
    load_q_pairs(it, c0, P, half);
    score_pass<Keep>(it, P, pp);
    softmax_pass(it, c0, P, l);
    value_pass<Keep>(it, c0, P, l);
  }
}

}  // namespace

int64_t amx_attention_set_kept_limit(int64_t bytes) { return g_kept_limit.exchange(bytes); }

bool amx_attention_supports(const KvLayout& L) {
  return !L.is_latent() && (L.dtype == DType::kBF16 || L.dtype == DType::kFP8E4M3) && L.head_dim % 32 == 0 &&
         L.head_dim <= kMaxHeadDim;
}
DENSA_TARGET_AVX512_VBMI_AMX_BF16 void attend_run_amx(const KvView& kv, int layer, int seq, int32_t pos0, int nq,
                                                      int kvh, const float* q, int64_t q_stride, int group,
                                                      float scale, float* out, WorkerScratch& ws) {
  const KvLayout& L = kv.layout;
  const int hd = L.head_dim;
  const bool fp8 = L.dtype == DType::kFP8E4M3;
  const bool dynamic = fp8 && L.scale_mode == KvScaleMode::kDynamic;
  const int ps = L.page_size;
  const int32_t last = pos0 + nq - 1;
  const int32_t len = last + 1;
  const int64_t s_stride = (len + kStep - 1) / kStep * kStep + 16;  // +16: rows not 4 KiB apart
  float static_k = 1.0f, static_v = 1.0f;
  if (fp8 && !dynamic) {
    static_k = kv.static_scales[(layer * 2 + 0) * L.num_kv_heads + kvh];
    static_v = kv.static_scales[(layer * 2 + 1) * L.num_kv_heads + kvh];
  }
  const int32_t* pages = kv.block_table.data() + kv.block_offsets[seq];
  const int64_t row_bytes = static_cast<int64_t>(hd) * L.elem_bytes();
  const int64_t k_off = L.data_offset(layer, 0, kvh, 0), v_off = L.data_offset(layer, 1, kvh, 0);
  const int64_t ks_off = dynamic ? L.scale_offset(layer, 0, kvh, 0) : 0;
  const int64_t vs_off = dynamic ? L.scale_offset(layer, 1, kvh, 0) : 0;
  const Fp8Decoder dec = fp8_decoder();
  AmxAttnScratch sc{ws};
  sc.fit(hd, s_stride);

  RunRows rr{kv, pages, row_bytes, k_off, v_off, ks_off, vs_off, static_k, static_v, ps, len, hd, fp8, dynamic, dec};

  const int total = nq * group;
  const int groups = (hd + 63) / 64;
  const int64_t steps = (len + kStep - 1) / kStep;
  const bool keep_k = fp8 || ps % 16 != 0;
  const int64_t kept_k_bytes = keep_k ? steps * kStep * 2 * hd : 0;
  const int64_t kept_v_bytes = steps * groups * 4 * kAmxTileBytes;
  const bool keep = total > kMaxCols && kept_k_bytes + kept_v_bytes <= g_kept_limit.load(std::memory_order_relaxed);
  AmxItem it{rr,   sc,     q,   q_stride, group,   scale,   out,     pos0,    last,   hd, hd / 32,
             fp8,  s_stride, sc.s, keep_k, groups, nullptr, nullptr, nullptr, nullptr};
  if (keep) {
    std::tie(it.kept_k, it.kept_v) = sc.fit_kept(kept_k_bytes, kept_v_bytes, 2 * steps * kStep);
    it.kept_ks = sc.kept_scales;
    it.kept_vs = it.kept_ks + steps * kStep;
    keep_rows(it, steps);
    passes<true>(it, total);
  } else {
    passes<false>(it, total);
  }
  _tile_release();
}

}  // namespace densa::attention_internal
