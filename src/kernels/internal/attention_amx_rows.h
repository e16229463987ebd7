#pragma once
// The row, table and tile helpers of the paged-attention AMX kernel (kernels/attention/
// attention_amx.cpp, which describes the three passes). Included by that file only: the helpers
// keep internal linkage and their always_inline attributes (with the target set
// DENSA_TARGET_AVX512_VBMI_AMX_BF16), so they fold into attend_run_amx as they must (out of line,
// the FP8 decoder's table vectors were reloaded for every row, and GCC may delete a call whose
// only effects are prefetches).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/worker_scratch.h"
#include "kernels/internal/align.h"
#include "kernels/internal/amx_tile.h"
#include "kernels/internal/attention_isa.h"
#include "kernels/internal/exp_avx512.h"
#include "kernels/internal/scratch_slots.h"
#include "kernels/internal/target.h"
#include "quant/fp8.h"

namespace densa::attention_internal {
namespace {

using kernels_internal::AmxTileConfig;
using kernels_internal::exp_ps;
using kernels_internal::kAmxTileBytes;

constexpr int kMaxCols = 8;  // (query, head) pairs per pass: hi and lo parts make 16 score columns / value rows
constexpr int kStep = 32;    // positions per value step (a B tile holds 16 position pairs)
// K / V prefetch distance, in 16-position tiles (2 passes of the score loop; 2, 8 and 16 were
// no faster for BF16 pages at 4K context in attention_bench's BM_PathsInterleaved).
constexpr int kAheadTiles = 4;

// 32 floats (x0: 0..15, x1: 16..31) as bf16 hi = bf16(x) and lo = bf16(x - hi), each 64 bytes
// in order: hi + lo is within 2^-16 |x| of x.
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void split_bf16(__m512 x0, __m512 x1, void* hi_out, void* lo_out) {
  const __m512bh hi = _mm512_cvtne2ps_pbh(x1, x0);  // x0 in the low half
  const __m512i hw = reinterpret_cast<const __m512i&>(hi);
  const __m256i hw0 = _mm512_castsi512_si256(hw), hw1 = _mm512_extracti64x4_epi64(hw, 1);
  const __m512 h0 = _mm512_cvtpbh_ps(reinterpret_cast<const __m256bh&>(hw0));
  const __m512 h1 = _mm512_cvtpbh_ps(reinterpret_cast<const __m256bh&>(hw1));
  const __m512bh lo = _mm512_cvtne2ps_pbh(_mm512_sub_ps(x1, h1), _mm512_sub_ps(x0, h0));
  _mm512_store_si512(hi_out, hw);
  _mm512_store_si512(lo_out, reinterpret_cast<const __m512i&>(lo));
}

// The bf16 bit patterns of the e4m3 values of codes 0..127 (exact: every e4m3 value is a
// bf16), split into high and low bytes for two vpermi2b; the sign bit is copied from the code.
struct alignas(64) Fp8Bf16Table {
  uint8_t hi[128];
  uint8_t lo[128];
  Fp8Bf16Table() {
    const float* table = fp8_e4m3_decode_table();
    for (int c = 0; c < 128; ++c) {
      const uint16_t b = f32_to_bf16(table[c]);
      hi[c] = static_cast<uint8_t>(b >> 8);
      lo[c] = static_cast<uint8_t>(b & 0xff);
    }
  }
};
const Fp8Bf16Table& fp8_bf16_table() {
  static const Fp8Bf16Table t;
  return t;
}

// Byte 16 i + e takes code 8 i + e and byte 16 i + 8 + e takes code 32 + 8 i + e (i < 4, e < 8),
// so that unpacklo / unpackhi_epi8 (per 128-bit lane) give elements 0..31 and 32..63 in order.
struct alignas(64) Fp8OrderIndex {
  uint8_t idx[64];
  Fp8OrderIndex() {
    for (int i = 0; i < 4; ++i) {
      for (int e = 0; e < 8; ++e) {
        idx[16 * i + e] = static_cast<uint8_t>(8 * i + e);
        idx[16 * i + 8 + e] = static_cast<uint8_t>(32 + 8 * i + e);
      }
    }
  }
};
const Fp8OrderIndex& fp8_order_index() {
  static const Fp8OrderIndex t;
  return t;
}

struct Fp8Decoder {
  __m512i hi0, hi1, lo0, lo1, order;
};

DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE Fp8Decoder fp8_decoder() {
  const Fp8Bf16Table& t = fp8_bf16_table();
  return {_mm512_load_si512(t.hi), _mm512_load_si512(t.hi + 64), _mm512_load_si512(t.lo),
          _mm512_load_si512(t.lo + 64), _mm512_load_si512(fp8_order_index().idx)};
}

// 64 codes to their exact bf16 values in order: w0 = elements 0..31, w1 = 32..63.
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void fp8_to_bf16_in_order(__m512i codes, const Fp8Decoder& t, __m512i& w0,
                                                                   __m512i& w1) {
  const __m512i c = _mm512_permutexvar_epi8(t.order, codes);
  __m512i hi = _mm512_permutex2var_epi8(t.hi0, c, t.hi1);
  const __m512i lo = _mm512_permutex2var_epi8(t.lo0, c, t.lo1);
  hi = _mm512_ternarylogic_epi32(hi, c, _mm512_set1_epi8(static_cast<char>(0x80)), 0xf8);  // hi | (c & 0x80)
  w0 = _mm512_unpacklo_epi8(lo, hi);
  w1 = _mm512_unpackhi_epi8(lo, hi);
}

// Elements [d0, d0 + 64) of a cache row as bf16 (w0: d0 .. d0 + 31, w1: the next 32, zero past
// head_dim; head_dim - d0 is 32 or at least 64).
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void row_bf16_64(const uint8_t* row, int d0, int hd, bool fp8, const Fp8Decoder& t,
                                                          __m512i& w0, __m512i& w1) {
  const bool full = hd - d0 >= 64;
  if (fp8) {
    const __m512i codes = full ? _mm512_loadu_si512(row + d0) : _mm512_maskz_loadu_epi8(0xffffffffull, row + d0);
    fp8_to_bf16_in_order(codes, t, w0, w1);
  } else {
    const uint8_t* p = row + 2 * d0;
    w0 = _mm512_loadu_si512(p);
    w1 = full ? _mm512_loadu_si512(p + 64) : _mm512_setzero_si512();
  }
}

// v[0 .. PP) hold 16 PP consecutive floats x[r PP + i] (a C tile of PP columns stored densely).
// Repeated even / odd splits leave v[k] = column bit_reverse(k) over the 16 rows. PP is a
// template argument so that the vectors stay in registers.
template <int PP>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void tile_columns(__m512* v) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
#pragma GCC unroll 4
  for (int len = PP; len > 1; len /= 2) {
    __m512 t[PP];
#pragma GCC unroll 16
    for (int s = 0; s < PP; s += len) {
#pragma GCC unroll 8
      for (int m = 0; m < len / 2; ++m) {
        t[s + m] = _mm512_permutex2var_ps(v[s + 2 * m], even, v[s + 2 * m + 1]);
        t[s + len / 2 + m] = _mm512_permutex2var_ps(v[s + 2 * m], odd, v[s + 2 * m + 1]);
      }
    }
#pragma GCC unroll 16
    for (int k = 0; k < PP; ++k) v[k] = t[k];
  }
}

constexpr int bit_reverse(int k, int bits) {
  int r = 0;
  for (int b = 0; b < bits; ++b) r |= ((k >> b) & 1) << (bits - 1 - b);
  return r;
}

// The dim that column m of value C tile c holds, within its 64-dim group (see value_b_rows).
inline int value_dim(bool fp8, int c, int m) {
  return fp8 ? 16 * (m / 4) + 4 * c + m % 4 : 32 * (c / 2) + 8 * (m / 4) + 4 * (c % 2) + m % 4;
}

// B row k of the 4 value tiles of one 64-dim group from V rows a and b (positions 2 k, 2 k + 1;
// null = past the last position, zero): dword m of tile c holds the two rows' bf16 of dim
// value_dim(c, m). bf16: unpacklo / unpackhi_epi16 of the rows' dims [0, 32) (tiles 0, 1) and
// [32, 64) (2, 3), whose 128-bit lane i gives dims 8 i .. 8 i + 3 (lo) and 8 i + 4 .. (hi). fp8:
// the codes are interleaved first (unpacklo / unpackhi_epi8: lane i gives dims 16 i .. 16 i + 7
// and 16 i + 8 ..), then each byte decoded to a word in the same order.
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void value_b_rows(const uint8_t* a, const uint8_t* b, int d0, int hd, bool fp8,
                                                           const Fp8Decoder& t, uint8_t* out) {
  const bool full = hd - d0 >= 64;
  if (fp8) {
    const __mmask64 m = full ? ~0ull : 0xffffffffull;
    const __m512i ca = a != nullptr ? _mm512_maskz_loadu_epi8(m, a + d0) : _mm512_setzero_si512();
    const __m512i cb = b != nullptr ? _mm512_maskz_loadu_epi8(m, b + d0) : _mm512_setzero_si512();
    const __m512i x[2] = {_mm512_unpacklo_epi8(ca, cb), _mm512_unpackhi_epi8(ca, cb)};
    for (int h = 0; h < 2; ++h) {
      __m512i hi = _mm512_permutex2var_epi8(t.hi0, x[h], t.hi1);
      const __m512i lo = _mm512_permutex2var_epi8(t.lo0, x[h], t.lo1);
      hi = _mm512_ternarylogic_epi32(hi, x[h], _mm512_set1_epi8(static_cast<char>(0x80)), 0xf8);
      _mm512_store_si512(out + (2 * h) * kAmxTileBytes, _mm512_unpacklo_epi8(lo, hi));
      _mm512_store_si512(out + (2 * h + 1) * kAmxTileBytes, _mm512_unpackhi_epi8(lo, hi));
    }
  } else {
    for (int h = 0; h < (full ? 2 : 1); ++h) {
      const __m512i ra = a != nullptr ? _mm512_loadu_si512(a + 2 * d0 + 64 * h) : _mm512_setzero_si512();
      const __m512i rb = b != nullptr ? _mm512_loadu_si512(b + 2 * d0 + 64 * h) : _mm512_setzero_si512();
      _mm512_store_si512(out + (2 * h) * kAmxTileBytes, _mm512_unpacklo_epi16(ra, rb));
      _mm512_store_si512(out + (2 * h + 1) * kAmxTileBytes, _mm512_unpackhi_epi16(ra, rb));
    }
  }
}

// Where one work item's K and V rows are. Its members that decode rows are inlined into
// attend_run_amx (as is the lambda that calls k_tile): out of line, the decoder's table vectors
// were reloaded from this object for every row decoded.
struct RunRows {
  const KvView& kv;
  const int32_t* pages;
  int64_t row_bytes, k_off, v_off, ks_off, vs_off;
  float static_k, static_v;
  int ps;
  int32_t len;  // positions 0 .. len - 1
  int hd;
  bool fp8, dynamic;
  Fp8Decoder dec;

  // Rows [p0, p0 + n) of K (which = 0) or V (1), p0 a multiple of 16: pointers, and the row
  // scales (1 for bf16); scales past n are 0. Pages of whole tiles give 16 rows by arithmetic and
  // their dynamic scales by one vector load.
  DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void rows_of(int which, int32_t p0, int n, const uint8_t** rows, float* scales) const {
    const int64_t off = which == 0 ? k_off : v_off;
    const int64_t s_off = which == 0 ? ks_off : vs_off;
    const __m512 fixed = _mm512_set1_ps(which == 0 ? static_k : static_v);
    if (ps % 16 == 0) {
      for (int r0 = 0; r0 < n; r0 += 16) {
        const int32_t p = p0 + r0;
        const uint8_t* page = kv.page_ptr(pages[p / ps]);
        const int slot = p % ps;
        const int m = std::min(16, n - r0);
        for (int r = 0; r < m; ++r) rows[r0 + r] = page + off + (slot + r) * row_bytes;
        const __mmask16 live = m == 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << m) - 1);
        _mm512_storeu_ps(scales + r0, dynamic ? _mm512_maskz_loadu_ps(live, page + s_off + slot * 4)
                                              : _mm512_maskz_mov_ps(live, fixed));
      }
      return;
    }
    int32_t page_idx = p0 / ps;
    int slot = p0 % ps;
    const uint8_t* page = kv.page_ptr(pages[page_idx]);
    for (int r = 0; r < n; ++r) {
      rows[r] = page + off + slot * row_bytes;
      if (dynamic) {
        std::memcpy(&scales[r], page + s_off + slot * 4, 4);
      } else {
        scales[r] = which == 0 ? static_k : static_v;
      }
      if (++slot == ps && r + 1 < n) {
        slot = 0;
        page = kv.page_ptr(pages[++page_idx]);
      }
    }
  }

  // Rows [p0, p0 + n) and their dynamic scales into L2 (prefetcht2: measured faster than into
  // L1 in attention_bench). Inlined: GCC deletes calls to a function whose only effects are
  // prefetches (tests/kernels/prefetch_codegen_test.cpp checks the binary keeps them).
  DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void prefetch_rows(int which, int32_t p0, int n) const {
    if (p0 >= len) return;
    n = std::min<int32_t>(n, len - p0);
    const int64_t off = which == 0 ? k_off : v_off;
    const int64_t s_off = which == 0 ? ks_off : vs_off;
    for (int32_t p = p0; p < p0 + n;) {
      const int slot = p % ps;
      const int32_t m = std::min<int32_t>(p0 + n - p, ps - slot);
      const uint8_t* page = kv.page_ptr(pages[p / ps]);
      const uint8_t* base = page + off + slot * row_bytes;
      for (int64_t b = 0; b < m * row_bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(base + b), _MM_HINT_T2);
      if (dynamic) _mm_prefetch(reinterpret_cast<const char*>(page + s_off + slot * 4), _MM_HINT_T2);
      p += m;
    }
  }

  // The A rows of the 16 K rows from position t0 and their scales (0 past the last position):
  // straight from the page (bf16, pages of whole tiles; rows past the last position are read
  // and never used) or decoded into buf (zero past the last position).
  DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE const uint8_t* k_tile(int32_t t0, uint8_t* buf, int64_t& stride, float* kscale) const {
    const int rows = std::min<int32_t>(16, len - t0);
    const uint8_t* krows[16];
    rows_of(0, t0, rows, krows, kscale);
    for (int r = rows; r < 16; ++r) kscale[r] = 0.0f;  // (the whole-tile path zeroes them too)
    if (!fp8 && ps % 16 == 0) {
      stride = row_bytes;
      return krows[0];
    }
    stride = 2 * hd;
    if (fp8 && rows == 16 && hd % 64 == 0 && ps % 16 == 0) {
      // A whole tile of one page: rows at a fixed stride, every 64 dims a full vector.
      const uint8_t* src = krows[0];
      for (int d0 = 0; d0 < hd; d0 += 64) {
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) {
          __m512i w0, w1;
          fp8_to_bf16_in_order(_mm512_loadu_si512(src + r * row_bytes + d0), dec, w0, w1);
          _mm512_store_si512(buf + r * 2 * hd + 2 * d0, w0);
          _mm512_store_si512(buf + r * 2 * hd + 2 * d0 + 64, w1);
        }
      }
      return buf;
    }
    for (int r = 0; r < 16; ++r) {
      uint8_t* dst = buf + r * 2 * hd;
      for (int d0 = 0; d0 < hd; d0 += 64) {
        __m512i w0 = _mm512_setzero_si512(), w1 = _mm512_setzero_si512();
        if (r < rows) row_bf16_64(krows[r], d0, hd, fp8, dec, w0, w1);
        _mm512_storeu_si512(dst + 2 * d0, w0);
        if (hd - d0 >= 64) _mm512_storeu_si512(dst + 2 * d0 + 64, w1);
      }
    }
    return buf;
  }
};

// One stored score tile (PP columns: pair n's hi part in n, lo part in PP / 2 + n) into the
// pairs' rows of the score buffer: s[n * s_stride + t] = (hi + lo)[t] x kscale[t] (fp8).
template <int PP>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void store_scores(const float* c, const float* kscale, bool fp8, int P, float* s, int64_t s_stride) {
  constexpr int kBits = PP == 2 ? 1 : PP == 4 ? 2 : PP == 8 ? 3 : 4;
  __m512 v[PP];
  for (int k = 0; k < PP; ++k) v[k] = _mm512_load_ps(c + 16 * k);
  tile_columns<PP>(v);
  const __m512 ks = _mm512_load_ps(kscale);
  // Column n < PP / 2 sits at k = bit_reverse(n) (even), its lo partner PP / 2 + n at k + 1.
#pragma GCC unroll 8
  for (int k = 0; k < PP; k += 2) {
    const int n = bit_reverse(k, kBits);
    if (n >= P) continue;
    const __m512 sum = _mm512_add_ps(v[k], v[k + 1]);
    _mm512_storeu_ps(s + n * s_stride, fp8 ? _mm512_mul_ps(sum, ks) : sum);
  }
}

DENSA_TARGET_AVX512_VBMI_AMX_BF16 void gather_scores(const float* c, const float* kscale, bool fp8, int P, int pp, float* s,
                                                     int64_t s_stride) {
  switch (pp) {
    case 2: store_scores<2>(c, kscale, fp8, P, s, s_stride); break;
    case 4: store_scores<4>(c, kscale, fp8, P, s, s_stride); break;
    case 8: store_scores<8>(c, kscale, fp8, P, s, s_stride); break;
    default: store_scores<16>(c, kscale, fp8, P, s, s_stride); break;
  }
}

// The 4 B tiles (V rows of dims [d0, d0 + 64)) of the value step from position u0, and its
// rows' V scales; positions past the last are zero rows with scale 0.
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void build_value_b(const RunRows& rr, int32_t u0, int d0, uint8_t* vb, float* vscale) {
  const int rows = std::min<int32_t>(kStep, rr.len - u0);
  const uint8_t* vrows[kStep];
  rr.rows_of(1, u0, rows, vrows, vscale);
  for (int r = rows; r < kStep; ++r) vscale[r] = 0.0f;
  for (int k = 0; k < 16; ++k) {
    value_b_rows(2 * k < rows ? vrows[2 * k] : nullptr, 2 * k + 1 < rows ? vrows[2 * k + 1] : nullptr, d0, rr.hd,
                 rr.fp8, rr.dec, vb + 64 * k);
  }
}

// The A tile of the value step from position u0: weights = probability x V row scale as bf16 hi
// parts in rows 0 .. P-1 and lo parts in P .. 2P-1 (0 where the scale is 0).
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void build_value_a(const float* s, int64_t s_stride, int P, int32_t u0, const float* vscale,
                                                            uint8_t* a) {
  const __m512 vs0 = _mm512_loadu_ps(vscale), vs1 = _mm512_loadu_ps(vscale + 16);
  for (int n = 0; n < P; ++n) {
    const float* sn = s + n * s_stride + u0;
    split_bf16(_mm512_mul_ps(_mm512_loadu_ps(sn), vs0), _mm512_mul_ps(_mm512_loadu_ps(sn + 16), vs1), a + 64 * n,
               a + 64 * (P + n));
  }
}

// One item's buffers, in its thread's WorkerScratch.
struct AmxAttnScratch {
  WorkerScratch& ws;
  float* s = nullptr;       // [kMaxCols][s_stride] scores, then probabilities
  uint8_t* qb = nullptr;    // [chunk] B tiles of q (hi and lo parts as columns), 1 KiB each
  uint8_t* kbuf = nullptr;  // [2 buffers][2 tiles] 16 K rows (pages not holding whole tiles)
  uint8_t* vb = nullptr;    // [2 buffers] 4 value B tiles
  uint8_t* a = nullptr;     // [2 buffers] the value A tile
  float* c = nullptr;       // stored C tiles (4 x 1 KiB: two score passes, or the value tiles)
  // An item of several passes decodes its rows once (see attend_run_amx): K rows as bf16
  // ([positions][hd]) and the value B tiles ([steps][64-dim groups][4 tiles]), and their scales.
  float* kept_scales = nullptr;

  // The kept K rows (k_bytes) and value tiles (v_bytes), each 64-byte aligned, and room for
  // `scales` scales in kept_scales.
  std::pair<uint8_t*, uint8_t*> fit_kept(int64_t k_bytes, int64_t v_bytes, int64_t scales) {
    uint8_t* base = ws.bytes(kernels_internal::kSlotAmxAttnKept, static_cast<size_t>(k_bytes + v_bytes));
    kept_scales = ws.array<float>(kernels_internal::kSlotAmxAttnKeptScales, static_cast<size_t>(scales));
    return {base, base + k_bytes};
  }

  void fit(int hd, int64_t s_stride) {
    const int64_t need = (hd / 32) * kAmxTileBytes + 4 * 16 * hd * 2 + 2 * 4 * kAmxTileBytes + 2 * kAmxTileBytes +
                         4 * kAmxTileBytes;
    uint8_t* base = ws.bytes(kernels_internal::kSlotAmxAttnTiles, static_cast<size_t>(need));
    qb = base;
    kbuf = qb + (hd / 32) * kAmxTileBytes;
    vb = kbuf + 4 * 16 * hd * 2;
    a = vb + 2 * 4 * kAmxTileBytes;
    c = reinterpret_cast<float*>(a + 2 * kAmxTileBytes);
    s = ws.array<float>(kernels_internal::kSlotAmxAttnScores, static_cast<size_t>(kMaxCols * s_stride));
  }
};

// C tile 0 += A tile 2 x q tile (3 + K), and C tile 1 += A tile 7 x the same (the tile
// intrinsics take literal tile numbers).
template <int K>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void dp_tile0(std::integral_constant<int, K>) {
  if constexpr (K == 0) _tile_dpbf16ps(0, 2, 3);
  if constexpr (K == 1) _tile_dpbf16ps(0, 2, 4);
  if constexpr (K == 2) _tile_dpbf16ps(0, 2, 5);
  if constexpr (K == 3) _tile_dpbf16ps(0, 2, 6);
}
template <int K>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void dp_tile1(std::integral_constant<int, K>) {
  if constexpr (K == 0) _tile_dpbf16ps(1, 7, 3);
  if constexpr (K == 1) _tile_dpbf16ps(1, 7, 4);
  if constexpr (K == 2) _tile_dpbf16ps(1, 7, 5);
  if constexpr (K == 3) _tile_dpbf16ps(1, 7, 6);
}

// One 32-dim chunk of the scores: q's B tile is tile 3 + K (CH > 0), or loaded into tile 3.
template <int CH, int K>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void score_chunk(const uint8_t* a0, const uint8_t* a1, int64_t stride, const uint8_t* qb, int ch) {
  if constexpr (CH == 0) _tile_loadd(3, qb + ch * kAmxTileBytes, 64);
  _tile_loadd(2, a0 + 64 * ch, stride);
  dp_tile0(std::integral_constant<int, K>{});
  if (a1 != nullptr) {
    _tile_loadd(7, a1 + 64 * ch, stride);
    dp_tile1(std::integral_constant<int, K>{});
  }
}

template <int CH, int... K>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void score_resident_chunks(std::integer_sequence<int, K...>, const uint8_t* a0, const uint8_t* a1,
                                                                    int64_t stride, const uint8_t* qb) {
  (score_chunk<CH, K>(a0, a1, stride, qb, K), ...);
}

// Scores of two 16-position tiles (A rows at a0 and a1, both at `stride`; a1 null: one tile) into
// C tiles 0 and 1, stored densely at c and c + 256. q's B tiles stay in tiles 3 .. 2 + CH for
// CH = chunks <= 4; CH = 0 loads each chunk's into tile 3.
template <int CH>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void score_tiles(const uint8_t* a0, const uint8_t* a1, int64_t stride, const uint8_t* qb,
                                                          int chunks, float* c, int pp) {
  _tile_zero(0);
  if (a1 != nullptr) _tile_zero(1);
  if constexpr (CH == 0) {
    for (int ch = 0; ch < chunks; ++ch) score_chunk<0, 0>(a0, a1, stride, qb, ch);
  } else {
    score_resident_chunks<CH>(std::make_integer_sequence<int, CH>{}, a0, a1, stride, qb);
  }
  _tile_stored(0, c, 4 * pp);
  if (a1 != nullptr) _tile_stored(1, c + 256, 4 * pp);
}

// q's B tiles (one per 32-dim chunk) into tiles 3 .. 2 + CH, for the whole score pass.
template <int CH>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void load_q_tiles(const uint8_t* qb) {
  if constexpr (CH >= 1) _tile_loadd(3, qb, 64);
  if constexpr (CH >= 2) _tile_loadd(4, qb + kAmxTileBytes, 64);
  if constexpr (CH >= 3) _tile_loadd(5, qb + 2 * kAmxTileBytes, 64);
  if constexpr (CH >= 4) _tile_loadd(6, qb + 3 * kAmxTileBytes, 64);
}

// Value step: C tile c += A x B c (A rows: the pairs' weights, hi parts then lo parts).
template <int NC>
DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE void value_tiles(const uint8_t* a, const uint8_t* vb) {
  _tile_loadd(4, a, 64);
  _tile_loadd(6, vb, 64);
  _tile_dpbf16ps(0, 4, 6);
  _tile_loadd(7, vb + kAmxTileBytes, 64);
  _tile_dpbf16ps(1, 4, 7);
  if constexpr (NC == 4) {
    _tile_loadd(5, vb + 2 * kAmxTileBytes, 64);
    _tile_dpbf16ps(2, 4, 5);
    _tile_loadd(6, vb + 3 * kAmxTileBytes, 64);
    _tile_dpbf16ps(3, 4, 6);
  }
}

}  // namespace

}  // namespace densa::attention_internal
