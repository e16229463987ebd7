// FP8, BF16 and F16 matmuls on AMX tiles (tdpbf16ps; kernels/internal/
// matmul_quant_avx512_kernels.h): the weights decoded (FP8, scale folded in), copied (BF16) or
// split exactly (F16) into bf16 A tiles, x prepared by prepare_x_amx_rows as B tiles.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/matmul_quant_avx512_kernels.h"

#include <vector>

namespace densa::matmul_internal {
namespace {

// ---- FP8 on AMX tiles (CPUs with AMX-BF16, cpu_use_amx()) ----
//
// W8A16 by tdpbf16ps, with the block scale folded into the weights: each weight becomes
// bf16(value * scale) (the fp32 product rounded to nearest even, as dequantize_row then
// f32_to_bf16 give it), x becomes bf16(x) in the per-64 unpack order of prepare_x_fp8, and one
// C tile sums a row's products over all K. Folding costs nothing in the decode (a 128-entry
// table of bf16(value * scale) per scale block, used by the same two vpermi2b as fp8_to_bf16)
// and leaves no per-block fixup between tile chains (per-block sums with an fp32 fma each, as
// the vdpbf16ps path does, held the GEMV at ~7 GB/s: every block ended a tile chain).
//  - A tile = 16 weight rows x 32 of their columns (64 bytes of bf16 per row), decoded into a
//    per-thread buffer of 32 row-major bf16 rows (a tile loads 16 of them at the row stride).
//  - B tile = the same 32 columns of x for N tokens in the VNNI layout tdpbf16ps reads: row p
//    holds, per token, the bf16 pair (2p, 2p+1) of that K-step (prepare_x_amx_rows).
//  - C tile = 16 rows x N tokens, fp32: C[r][i] = y[i, r] (the transpose of y).
// Per (i, r) the order is fixed by this code alone: K-steps in order on one C tile from zero,
// the tile unit's own summation inside each tdpbf16ps. C[r][i] depends only on weight row r and
// x row i, so the tiling (row tiles, token tiles, x blocks), n and the thread split change no
// bit. N is 1 for n = 1 (decode) and 16 otherwise (tails padded with zero tokens); tests check
// that both give the same bits. Error: |y - y_exact| <= (2^-8 + 2^-18) * sum|w x| plus the
// sums' fp32 rounding (two bf16 roundings per product); twin ref::matmul_fp8_scaled_x_bf16.
// The bits differ from the vdpbf16ps path, so one process uses one of the two for every n
// (matmul_quant_fp8_amx()).
//
// BF16 on AMX (W16A16, matmul_quant_bf16_amx()): the same kernels, x prepared the same way;
// where an FP8 row is decoded into the A buffer, a BF16 row is copied, each 64-column step
// permuted into prepare_x_fp8's order (amx_bf16_row). The weights are exact; the error is x's
// rounding to bf16 plus the sums' fp32 rounding (twin: ref::matmul on bf16(x)). No scales.
constexpr int64_t kAmxRows = 16;              // rows of an A or C tile
constexpr int64_t kAmxXBlockBytes = 1 << 20;  // prepared x per block (L2 keeps it; see amx_gemm)
constexpr int64_t kAmxChunkSteps = 8;         // GEMV: 64-column steps per pipelined chunk

using kernels_internal::AmxTileConfig;

// All 8 tiles 16 rows; A tiles (a_mask) 64 bytes wide, the others (B and C) 4 * tokens.
AmxTileConfig amx_config(int64_t tokens, unsigned a_mask) {
  AmxTileConfig c;
  for (int t = 0; t < 8; ++t) c.set(t, 16, (a_mask >> t & 1u) ? 64 : static_cast<int>(4 * tokens));
  return c;
}

// bf16 bytes of value(code) * scale for the codes 0x00 .. 0x7f of one scale block.
struct alignas(64) ScaledLut {
  uint8_t hi[128];
  uint8_t lo[128];
};

struct AmxScratch {
  uint8_t* a = nullptr;       // 32 decoded rows (GEMM: all K; GEMV: two buffers of one chunk)
  ScaledLut* luts = nullptr;  // [row block of the pair][scale block]: the tables of one row pair
  const ScaledLut* row_luts[32] = {};  // row i of the pair: its row block's tables
  float* c = nullptr;         // 4 C tiles as stored, [16 rows][16 tokens] each
};

DENSA_TARGET_AVX512_QUANT void build_scaled_luts(const WeightView& w, int64_t row_block, ScaledLut* luts) {
  const float* table = fp8_e4m3_decode_table();  // codes 0..127: the non-negative values
  const int64_t blocks = (w.cols + w.scale_cols - 1) / w.scale_cols;
  const float* srow = w.scales_f32 + row_block * blocks;
  for (int64_t b = 0; b < blocks; ++b) {
    const __m512 sc = _mm512_set1_ps(srow[b]);
    for (int k = 0; k < 4; ++k) {  // codes 32 k .. 32 k + 31
      const __m512 v0 = _mm512_mul_ps(_mm512_loadu_ps(table + 32 * k), sc);
      const __m512 v1 = _mm512_mul_ps(_mm512_loadu_ps(table + 32 * k + 16), sc);
      const __m512bh h = _mm512_cvtne2ps_pbh(v1, v0);  // round to nearest even; NaN stays NaN
      const __m512i words = reinterpret_cast<const __m512i&>(h);
      _mm256_store_si256(reinterpret_cast<__m256i*>(luts[b].hi + 32 * k), _mm512_cvtepi16_epi8(_mm512_srli_epi16(words, 8)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(luts[b].lo + 32 * k), _mm512_cvtepi16_epi8(words));
    }
  }
}

// Row blocks a row pair from r0 can touch (the tables kept at once).
int64_t amx_lut_sets(const WeightView& w) { return std::min<int64_t>(2 * kAmxRows, (2 * kAmxRows - 1) / w.scale_rows + 2); }

// The tables of the row blocks of the pair's rows [r0, r_hi), and each row's pointer to them.
void amx_build_pair_luts(const WeightView& w, int64_t r0, int64_t r_hi, AmxScratch& s) {
  if (half_float(w.dtype)) return;  // no scales
  const int64_t blocks = (w.cols + w.scale_cols - 1) / w.scale_cols;
  const int64_t rb0 = r0 / w.scale_rows;
  for (int64_t rb = rb0; rb <= (r_hi - 1) / w.scale_rows; ++rb) build_scaled_luts(w, rb, s.luts + (rb - rb0) * blocks);
  for (int64_t r = r0; r < r_hi; ++r) s.row_luts[r - r0] = s.luts + (r / w.scale_rows - rb0) * blocks;
}

// One row's steps [st_begin, st_end) decoded to bf16(value * scale) into out, 128 bytes per
// step: a row of an A buffer. Prefetches its stream 512 bytes ahead into L1 and `far` bytes
// ahead into L2 (the same spot of the next row pair: the GEMV walks 32 rows in chunks, too
// many streams for the hardware prefetchers, and ran 2 threads at ~half the vdpbf16ps path's
// bandwidth without it).
DENSA_TARGET_AVX512_QUANT_INLINE void amx_decode_row(const uint8_t* rp, int64_t cols, int64_t st_begin, int64_t st_end,
                                        int64_t per_block, const ScaledLut* luts, uint8_t* out, int64_t far) {
  int64_t blk = st_begin / per_block;
  __m512i lut[4] = {_mm512_load_si512(luts[blk].hi), _mm512_load_si512(luts[blk].hi + 64),
                    _mm512_load_si512(luts[blk].lo), _mm512_load_si512(luts[blk].lo + 64)};
  for (int64_t st = st_begin; st < st_end; ++st, out += 128) {
    if (st / per_block != blk) {
      blk = st / per_block;
      lut[0] = _mm512_load_si512(luts[blk].hi);
      lut[1] = _mm512_load_si512(luts[blk].hi + 64);
      lut[2] = _mm512_load_si512(luts[blk].lo);
      lut[3] = _mm512_load_si512(luts[blk].lo + 64);
    }
    _mm_prefetch(reinterpret_cast<const char*>(rp + st * kFp8Step + kPrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(rp + st * kFp8Step + far), _MM_HINT_T1);
    const __m512i codes = (st + 1) * kFp8Step <= cols ? _mm512_loadu_si512(rp + st * kFp8Step)
                                                      : _mm512_maskz_loadu_epi8(byte_mask(cols - st * kFp8Step), rp + st * kFp8Step);
    __m512i w0, w1;
    fp8_to_bf16(codes, lut, w0, w1);
    _mm512_store_si512(out, w0);
    _mm512_store_si512(out + 64, w1);
  }
}

// Word indices that put 64 bf16 values (elements 0..31 in one vector, 32..63 in another) into
// prepare_x_fp8's per-64 order: two vpermt2w, one per output vector.
alignas(64) constexpr int16_t kStepOrder[2][32] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23, 32, 33, 34, 35, 36, 37, 38, 39, 48, 49, 50, 51, 52, 53, 54, 55},
    {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31, 40, 41, 42, 43, 44, 45, 46, 47, 56, 57, 58, 59, 60, 61, 62, 63}};

// The two lines of a 16-bit row's 64-column step at src: kPrefetchBytes ahead into L1 and `far`
// ahead into L2, as amx_decode_row does for an FP8 step's one line. Inlined, so the compiler
// keeps the prefetches (GCC deletes calls to a function whose only effects are prefetches;
// tests/kernels/prefetch_codegen_test.cpp).
DENSA_TARGET_AVX512_QUANT_INLINE void prefetch_step16(const uint8_t* src, int64_t far) {
  _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchBytes), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(src + 64 + kPrefetchBytes), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(src + far), _MM_HINT_T1);
  _mm_prefetch(reinterpret_cast<const char*>(src + 64 + far), _MM_HINT_T1);
}

// A BF16 row's steps [st_begin, st_end) as amx_decode_row writes an FP8 row's: the stored bf16
// values (exact: nothing is decoded or scaled), each 64-column step permuted into the per-64
// order of prepare_x_fp8, so both dtypes share the prepared x. Zeros past cols; the same
// prefetches.
DENSA_TARGET_AVX512_QUANT_INLINE void amx_bf16_row(const uint8_t* rp, int64_t cols, int64_t st_begin, int64_t st_end,
                                                   uint8_t* out, int64_t far) {
  const __m512i i0 = _mm512_load_si512(kStepOrder[0]), i1 = _mm512_load_si512(kStepOrder[1]);
  for (int64_t st = st_begin; st < st_end; ++st, out += 128) {
    const uint8_t* src = rp + st * 128;
    prefetch_step16(src, far);
    __m512i a, b;
    if ((st + 1) * kFp8Step <= cols) {
      a = _mm512_loadu_si512(src);
      b = _mm512_loadu_si512(src + 64);
    } else {
      const int64_t left = cols - st * kFp8Step;  // 1..63 elements
      a = _mm512_maskz_loadu_epi16(word_mask(left), src);
      b = _mm512_maskz_loadu_epi16(word_mask(left - 32), src + 64);
    }
    _mm512_store_si512(out, _mm512_permutex2var_epi16(a, i0, b));
    _mm512_store_si512(out + 64, _mm512_permutex2var_epi16(a, i1, b));
  }
}

// bf16 words [16 half, 16 half + 16) of `words` as fp32 (exact).
DENSA_TARGET_AVX512_QUANT_INLINE __m512 bf16_words_f32(__m512i words, int half) {
  const __m256i w16 = half ? _mm512_extracti64x4_epi64(words, 1) : _mm512_castsi512_si256(words);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w16), 16));
}

// An F16 row as a bf16 row of twice the steps (amx_cols): step 2s holds bf16(w) of the row's
// 64-column step s (round to nearest even), step 2s + 1 the remainders w - bf16(w), both in
// prepare_x_fp8's order. Every f16 value is exactly that sum (11 significant bits: 8 in the
// high part, the rest, with its exponent, in a bf16 of its own), so with x repeated for both
// steps the products are those of the exact f16 weights. Zeros past cols. st_begin is even
// (chunks and row passes hold whole pairs of steps), so each f16 step is read and converted
// once for both of its steps; a trailing odd st_end (never asked for) would write the high part.
DENSA_TARGET_AVX512_QUANT_INLINE void amx_f16_row(const uint8_t* rp, int64_t cols, int64_t st_begin, int64_t st_end, uint8_t* out,
                                                  int64_t far) {
  const __m512i i0 = _mm512_load_si512(kStepOrder[0]), i1 = _mm512_load_si512(kStepOrder[1]);
  for (int64_t vst = st_begin; vst < st_end; vst += 2, out += 256) {
    const int64_t st = vst / 2;
    const uint8_t* src = rp + st * 128;
    prefetch_step16(src, far);
    const int64_t left = cols - st * kFp8Step;
    __m512 v[4];
    for (int q = 0; q < 4; ++q) {
      const __m256i h = _mm256_maskz_loadu_epi16(static_cast<__mmask16>(word_mask(left - 16 * q)), src + 32 * q);
      v[q] = _mm512_cvtph_ps(h);
    }
    const __m512bh a = _mm512_cvtne2ps_pbh(v[1], v[0]), b = _mm512_cvtne2ps_pbh(v[3], v[2]);
    const __m512i ai = reinterpret_cast<const __m512i&>(a), bi = reinterpret_cast<const __m512i&>(b);
    _mm512_store_si512(out, _mm512_permutex2var_epi16(ai, i0, bi));
    _mm512_store_si512(out + 64, _mm512_permutex2var_epi16(ai, i1, bi));
    if (vst + 1 >= st_end) break;
    // w - bf16(w): exact in fp32, and exact again as a bf16.
    const __m512bh ra = _mm512_cvtne2ps_pbh(_mm512_sub_ps(v[1], bf16_words_f32(ai, 1)), _mm512_sub_ps(v[0], bf16_words_f32(ai, 0)));
    const __m512bh rb = _mm512_cvtne2ps_pbh(_mm512_sub_ps(v[3], bf16_words_f32(bi, 1)), _mm512_sub_ps(v[2], bf16_words_f32(bi, 0)));
    const __m512i rai = reinterpret_cast<const __m512i&>(ra), rbi = reinterpret_cast<const __m512i&>(rb);
    _mm512_store_si512(out + 128, _mm512_permutex2var_epi16(rai, i0, rbi));
    _mm512_store_si512(out + 192, _mm512_permutex2var_epi16(rai, i1, rbi));
  }
}

// Row i of the pair from r0, steps [st_begin, st_end), decoded into a + i * stride (an A tile is
// 16 of these rows, 64 bytes each, loaded at that stride); zero for rows at or past r_end. The
// pair's tables are built (amx_build_pair_luts).
DENSA_TARGET_AVX512_QUANT_INLINE void amx_decode_pair_row(const WeightView& w, int64_t r0, int64_t r_end, int i, int64_t st_begin,
                                             int64_t st_end, uint8_t* a, int64_t stride, const AmxScratch& s) {
  uint8_t* out = a + i * stride;
  const int64_t r = r0 + i;
  if (r >= r_end) {
    std::memset(out, 0, static_cast<size_t>(128 * (st_end - st_begin)));
    return;
  }
  const int64_t row_bytes = w.row_bytes();
  const uint8_t* rp = static_cast<const uint8_t*>(w.data) + r * row_bytes;
  if (w.dtype == DType::kBF16) return amx_bf16_row(rp, w.cols, st_begin, st_end, out, 2 * kAmxRows * row_bytes);
  if (w.dtype == DType::kF16) {
    DCHECK(st_begin % 2 == 0) << "F16 rows are decoded in whole pairs of steps";
    return amx_f16_row(rp, w.cols, st_begin, st_end, out, 2 * kAmxRows * row_bytes);
  }
  amx_decode_row(rp, w.cols, st_begin, st_end, w.scale_cols / kFp8Step, s.row_luts[i], out, 2 * kAmxRows * row_bytes);
}

// Rows [r0, r0 + 16 * ra) of a pair, steps [st_begin, st_end), as amx_decode_pair_row.
DENSA_TARGET_AVX512_QUANT void amx_decode_rows(const WeightView& w, int64_t r0, int64_t r_end, int ra, int64_t st_begin,
                                               int64_t st_end, uint8_t* a, int64_t stride, const AmxScratch& s) {
  for (int i = 0; i < 16 * ra; ++i) amx_decode_pair_row(w, r0, r_end, i, st_begin, st_end, a, stride, s);
}

// Scratch, in the thread's WorkerScratch: the A buffer (GEMM: 2 row tiles over all K, 176 KiB
// at 2,816 columns; GEMV: two chunks), the tables of one row pair and 4 C tiles.
AmxScratch amx_scratch(const WeightView& w, int64_t a_bytes, WorkerScratch& ws) {
  const int64_t blocks = half_float(w.dtype) ? 0 : (w.cols + w.scale_cols - 1) / w.scale_cols;
  const size_t lut_bytes = blocks == 0 ? 0 : static_cast<size_t>(amx_lut_sets(w) * blocks) * sizeof(ScaledLut);
  uint8_t* base =
      ws.bytes(kernels_internal::kSlotMatmulRows, static_cast<size_t>(a_bytes) + lut_bytes + 4 * kAmxTileBytes);
  AmxScratch s;
  s.a = base;
  s.luts = reinterpret_cast<ScaledLut*>(base + a_bytes);
  s.c = reinterpret_cast<float*>(base + a_bytes + lut_bytes);
  return s;
}

// GEMM (N = 16): RA row tiles x TB token tiles (C tile 2 h + u; A tiles 4, 5; B tiles 6, 7) over
// all K, then y from the stored C tiles.
template <int RA, int TB>
DENSA_TARGET_AVX512_QUANT_AMX_BF16 void amx_pass(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r0, int64_t r_end,
                                                 int64_t t0, int64_t a_stride, const AmxScratch& s) {
  const int64_t q_steps = amx_ksteps(amx_cols(w));
  const uint8_t* b0 = xp + t0 * q_steps * kAmxTileBytes;
  const uint8_t* b1 = b0 + q_steps * kAmxTileBytes;
  _tile_zero(0);
  if constexpr (TB > 1) _tile_zero(1);
  if constexpr (RA > 1) _tile_zero(2);
  if constexpr (RA > 1 && TB > 1) _tile_zero(3);
  for (int64_t q = 0; q < q_steps; ++q) {
    _tile_loadd(4, s.a + q * 64, a_stride);
    _tile_loadd(6, b0 + q * kAmxTileBytes, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (TB > 1) {
      _tile_loadd(7, b1 + q * kAmxTileBytes, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (RA > 1) {
      _tile_loadd(5, s.a + 16 * a_stride + q * 64, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (TB > 1) _tile_dpbf16ps(3, 5, 7);
    }
  }
  constexpr int64_t kC = 256;  // floats per stored C tile
  _tile_stored(0, s.c, 64);
  if constexpr (TB > 1) _tile_stored(1, s.c + kC, 64);
  if constexpr (RA > 1) _tile_stored(2, s.c + 2 * kC, 64);
  if constexpr (RA > 1 && TB > 1) _tile_stored(3, s.c + 3 * kC, 64);
  DENSA_MEMORY_BARRIER();
  for (int t = 0; t < 4; ++t) {
    const int h = t / 2, u = t % 2;
    if (h >= RA || u >= TB) continue;
    const int64_t rb = r0 + 16 * h;
    const int64_t rows = std::min<int64_t>(16, r_end - rb);
    const int64_t tok0 = (t0 + u) * 16;
    const int64_t toks = std::min<int64_t>(16, n - tok0);
    const float* c = s.c + t * kC;
    for (int64_t j = 0; j < toks; ++j) {
      float* yr = y + (tok0 + j) * w.rows + rb;
      for (int64_t r = 0; r < rows; ++r) yr[r] = c[r * 16 + j];
    }
  }
  DENSA_MEMORY_BARRIER();  // these reads of s.c come before the next pass's tile stores
}

DENSA_TARGET_AVX512_QUANT_AMX_BF16 void amx_gemm(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin,
                                                 int64_t r_end,
                                                 WorkerScratch& ws) {
  const int64_t q_steps = amx_ksteps(amx_cols(w)), steps = q_steps / 2;
  const int64_t token_tiles = (n + 15) / 16;
  // Row-major bf16 rows, padded by a line so that a tile's 16 rows do not share cache sets.
  const int64_t a_stride = q_steps * 64 + 64;
  AmxScratch s = amx_scratch(w, 2 * kAmxRows * a_stride, ws);
  const AmxTileConfig cfg = amx_config(16, 0x30);
  _tile_loadconfig(&cfg);
  // A block of token tiles whose B tiles stay in L2 while every row pair of this thread runs
  // over them (the weights are decoded once per block; 512 tokens at 1,024 columns is one).
  const int64_t block_tiles = std::max<int64_t>(2, kAmxXBlockBytes / (q_steps * kAmxTileBytes) / 2 * 2);
  for (int64_t tb = 0; tb < token_tiles; tb += block_tiles) {
    const int64_t tb_end = std::min(token_tiles, tb + block_tiles);
    for (int64_t r0 = r_begin; r0 < r_end; r0 += 2 * kAmxRows) {
      const int ra = r_end - r0 > kAmxRows ? 2 : 1;
      amx_build_pair_luts(w, r0, std::min(r_end, r0 + 2 * kAmxRows), s);
      amx_decode_rows(w, r0, r_end, ra, 0, steps, s.a, a_stride, s);
      DENSA_MEMORY_BARRIER();
      for (int64_t t0 = tb; t0 < tb_end; t0 += 2) {
        const bool two = t0 + 1 < tb_end;
        if (ra == 2) {
          two ? amx_pass<2, 2>(w, xp, n, y, r0, r_end, t0, a_stride, s) : amx_pass<2, 1>(w, xp, n, y, r0, r_end, t0, a_stride, s);
        } else {
          two ? amx_pass<1, 2>(w, xp, n, y, r0, r_end, t0, a_stride, s) : amx_pass<1, 1>(w, xp, n, y, r0, r_end, t0, a_stride, s);
        }
      }
    }
  }
  _tile_release();
}

// GEMV tile work: K-step q (the j-th of its chunk, whose A tiles start at a) for row tile h,
// into C tile h. x goes to B tile 6 or 7 and the rows to A tiles 2, 3 or 4, 5 by the parity of
// j, so a tile is loaded again only two K-steps after the products that read it.
DENSA_TARGET_AVX512_QUANT_AMX_BF16_INLINE void amx_gemv_op(const uint8_t* a, int64_t stride, const uint8_t* x, int64_t q, int j, int h) {
  const uint8_t* at = a + 16 * h * stride + 64 * j;
  switch ((j & 1) * 2 + h) {
    case 0:
      _tile_loadd(6, x + q * 64, 4);
      _tile_loadd(2, at, stride);
      _tile_dpbf16ps(0, 2, 6);
      break;
    case 1:
      _tile_loadd(3, at, stride);
      _tile_dpbf16ps(1, 3, 6);
      break;
    case 2:
      _tile_loadd(7, x + q * 64, 4);
      _tile_loadd(4, at, stride);
      _tile_dpbf16ps(0, 4, 7);
      break;
    default:
      _tile_loadd(5, at, stride);
      _tile_dpbf16ps(1, 5, 7);
      break;
  }
}

// GEMV (n = 1, N = 1), software-pipelined in chunks of kAmxChunkSteps 64-column steps of a row
// pair: the vector units decode the next chunk (of this pair, or the first of the next pair)
// into the other of two chunk buffers (which stay in L1) while the tile work of this chunk is
// spread between its rows, so the tile unit and the decode overlap (issued one after the other
// they added up: ~5 GB/s instead of ~15 from L2).
DENSA_TARGET_AVX512_QUANT_AMX_BF16 void amx_gemv(const WeightView& w, const uint8_t* xp, float* y, int64_t r_begin, int64_t r_end,
                                                 WorkerScratch& ws) {
  const int64_t steps = (amx_cols(w) + kFp8Step - 1) / kFp8Step;
  const int64_t a_stride = kAmxChunkSteps * 128 + 64;  // padded as in amx_gemm
  const int64_t chunk_bytes = 2 * kAmxRows * a_stride;
  AmxScratch s = amx_scratch(w, 2 * chunk_bytes, ws);
  const AmxTileConfig cfg = amx_config(1, 0x3c);
  _tile_loadconfig(&cfg);
  auto ra_of = [&](int64_t r0) { return r_end - r0 > kAmxRows ? 2 : 1; };
  amx_build_pair_luts(w, r_begin, std::min(r_end, r_begin + 2 * kAmxRows), s);
  amx_decode_rows(w, r_begin, r_end, ra_of(r_begin), 0, std::min(steps, kAmxChunkSteps), s.a, a_stride, s);
  int buf = 0;
  for (int64_t r0 = r_begin; r0 < r_end; r0 += 2 * kAmxRows) {
    const int ra = ra_of(r0);
    const int64_t r1 = r0 + 2 * kAmxRows;
    _tile_zero(0);
    _tile_zero(1);
    for (int64_t st = 0; st < steps; st += kAmxChunkSteps, buf ^= 1) {
      DENSA_MEMORY_BARRIER();  // the chunk's decode stores come before its tile loads
      const uint8_t* a = s.a + buf * chunk_bytes;
      const int nq = static_cast<int>(2 * (std::min(steps, st + kAmxChunkSteps) - st));
      const int ops = nq * ra;
      // What to decode meanwhile: the next chunk of this pair, or the first of the next pair.
      int64_t d_r0 = r0, d_st = st + kAmxChunkSteps;
      if (d_st >= steps) {
        d_r0 = r1;
        d_st = 0;
        if (d_r0 < r_end) amx_build_pair_luts(w, d_r0, std::min(r_end, d_r0 + 2 * kAmxRows), s);
      }
      int op = 0;
      if (d_r0 < r_end) {
        const int64_t d_end = std::min(steps, d_st + kAmxChunkSteps);
        uint8_t* next = s.a + (buf ^ 1) * chunk_bytes;
        const int d_rows = 16 * ra_of(d_r0);
        for (int i = 0; i < d_rows; ++i) {
          amx_decode_pair_row(w, d_r0, r_end, i, d_st, d_end, next, a_stride, s);
          // The tile work of this chunk, one op per d_rows / ops rows.
          if (op < ops && (i + 1) * ops >= (op + 1) * d_rows) {
            amx_gemv_op(a, a_stride, xp, 2 * st + op / ra, op / ra, op % ra);
            ++op;
          }
        }
      }
      for (; op < ops; ++op) amx_gemv_op(a, a_stride, xp, 2 * st + op / ra, op / ra, op % ra);
    }
    _tile_stored(0, s.c, 4);
    _tile_stored(1, s.c + 16, 4);
    DENSA_MEMORY_BARRIER();
    _mm512_mask_storeu_ps(y + r0, float_mask(r_end - r0), _mm512_load_ps(s.c));
    if (ra > 1) _mm512_mask_storeu_ps(y + r0 + 16, float_mask(r_end - r0 - 16), _mm512_load_ps(s.c + 16));
  }
  _tile_release();
}

}  // namespace

void amx_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin, int64_t r_end,
              WorkerScratch& ws) {
  if (n == 1) return amx_gemv(w, xp, y, r_begin, r_end, ws);
  amx_gemm(w, xp, n, y, r_begin, r_end, ws);
}

}  // namespace densa::matmul_internal
