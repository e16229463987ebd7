// AVX-512 VNNI and AMX-INT8 kernels for affine rows in 16-row tiles (WeightLayout::kAffineTiles16,
// quant/affine_tiles.h); the arithmetic both must keep is stated in kernels/internal/matmul_affine.h.
//  - VNNI (vnni_tile<T, NT>): per group, eight vpdpbusd of the group's 16 rows x 4 codes (one
//    row per lane) against x broadcast 4 bytes at a time give the 16 rows' exact sums in one
//    vector, shared by NT x rows; then two fmas per x row. The decode GEMV (NT = 1) prefetches
//    its stream, which is one sequential run of tiles per thread.
//  - AMX (amx_tile<T>, 16 x rows at a time, where AMX-INT8 is granted): per group one
//    tdpbsud(x tile: 16 x rows x 32 (or 16) columns, the group's codes as the B tile), the C
//    tile stored and finished per x row by the same two fmas; the next group's tile product is
//    issued before this group's epilogue. 4-bit codes are unpacked (and looked up) into a
//    16 KiB buffer per 1,024 columns, once for all x rows of the call. Partial sums go back to y
//    between column chunks as fp32, which changes no bit of the chain.
// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

#include "core/check.h"
#include "kernels/internal/amx_tile.h"
#include "kernels/internal/matmul_affine.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/internal/target.h"
#include "quant/activation_q8.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"

namespace densa::matmul_internal {
namespace {

constexpr int64_t kChunkBlocks = 8;  // AMX: 128-column blocks per pass over the x rows

template <DType T>
struct Fmt {
  static constexpr bool kNibbles = is_affine_nibbles(T), kSuper = is_affine_super(T), kG16 = T == DType::kA8K16;
  static constexpr int64_t kTileBlockBytes = kAffineTileRows * dtype_block_bytes(T);  // 16 rows x 128 columns
  static constexpr int64_t kCodeBytes = kAffineTileRows * affine_code_bytes(T);
  static constexpr int kGroups = static_cast<int>(affine_groups_per_block(T));
  static constexpr int64_t kGroupCols = affine_group(T);
};

// Group g's scale and min for the tile's 16 rows (lane = row): fp32 as stored, or D * s and
// M * m (exact products).
template <DType T>
DENSA_TARGET_AVX512_VNNI_INLINE void group_scales(const uint8_t* blk, int g, __m512& ws, __m512& mins) {
  const uint8_t* s = blk + Fmt<T>::kCodeBytes;
  if constexpr (Fmt<T>::kSuper) {
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 128 + 16 * g));
    const __m128i m8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 128 + 16 * (Fmt<T>::kGroups + g)));
    ws = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s8)), _mm512_loadu_ps(s));
    mins = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(m8)), _mm512_loadu_ps(s + 64));
  } else {
    ws = _mm512_loadu_ps(s + 64 * g);
    mins = _mm512_loadu_ps(s + 256 + 64 * g);
  }
}

// The one fp32 step every kernel of this layout ends a group with.
DENSA_TARGET_AVX512_VNNI_INLINE __m512 group_fma(__m512 acc, __m512i sum, __m512 ws, float xs, __m512 mins, float term) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(ws, _mm512_set1_ps(xs)), acc);
  return _mm512_fmadd_ps(mins, _mm512_set1_ps(term), acc);
}

// The 8 code vectors of 32-column group j of a tile block (vector q: columns 4q .. 4q + 3 of
// the group, 16 rows x 4 bytes), unsigned bytes.
template <DType T>
DENSA_TARGET_AVX512_VNNI_INLINE void group_codes(const uint8_t* blk, int j, __m512i lut, __m512i (&wv)[8]) {
  if constexpr (Fmt<T>::kNibbles) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512i v = _mm512_loadu_si512(blk + 256 * j + 64 * q);
      wv[q] = _mm512_and_si512(v, low4);
      wv[q + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      if constexpr (T != DType::kA4G32) {
        wv[q] = _mm512_shuffle_epi8(lut, wv[q]);
        wv[q + 4] = _mm512_shuffle_epi8(lut, wv[q + 4]);
      }
    }
  } else {
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) wv[q] = _mm512_loadu_si512(blk + 512 * j + 64 * q);
  }
}

template <DType T>
DENSA_TARGET_AVX512_VNNI_INLINE __m512i nibble_lut() {
  if constexpr (Fmt<T>::kNibbles && T != DType::kA4G32) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(affine_nibble_codes(T))));
  }
  return _mm512_setzero_si512();
}

const uint8_t* tile_base(const WeightView& w, int64_t tile, int64_t tile_block_bytes) {
  return static_cast<const uint8_t*>(w.data) + tile * (w.cols / kAffineBlock) * tile_block_bytes;
}

// NT x rows from i0 against 16-row tile `tile`.
template <DType T, int NT, bool kPrefetch>
DENSA_TARGET_AVX512_VNNI_INLINE void vnni_tile(const WeightView& w, const uint8_t* xp, int64_t x_stride, float* y, int64_t tile,
                                               int64_t i0) {
  using F = Fmt<T>;
  const int64_t blocks = w.cols / kAffineBlock;
  const uint8_t* base = tile_base(w, tile, F::kTileBlockBytes);
  const __m512i lut = nibble_lut<T>();
  AffineXRow xr[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) xr[t] = affine_x_row(xp, x_stride, w.cols, i0 + t);
  __m512 acc[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = base + b * F::kTileBlockBytes;
    if constexpr (kPrefetch) {  // one block ahead into L1, four into L2
      for (int64_t l = 0; l < F::kTileBlockBytes; l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(blk + F::kTileBlockBytes + l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(blk + 4 * F::kTileBlockBytes + l), _MM_HINT_T1);
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512i wv[8];
      group_codes<T>(blk, j, lut, wv);
      __m512 ws_a, min_a, ws_b, min_b;
      group_scales<T>(blk, F::kG16 ? 2 * j : j, ws_a, min_a);
      if constexpr (F::kG16) group_scales<T>(blk, 2 * j + 1, ws_b, min_b);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const auto* x4 = reinterpret_cast<const int32_t*>(xr[t].q + b * kAffineBlock + 32 * j);
        __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[0], _mm512_set1_epi32(x4[0]));
        __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[4], _mm512_set1_epi32(x4[4]));
#pragma GCC unroll 3
        for (int q = 1; q < 4; ++q) {
          s0 = _mm512_dpbusd_epi32(s0, wv[q], _mm512_set1_epi32(x4[q]));
          s1 = _mm512_dpbusd_epi32(s1, wv[q + 4], _mm512_set1_epi32(x4[q + 4]));
        }
        const float xs = xr[t].xs[b * 4 + j];
        if constexpr (F::kG16) {
          acc[t] = group_fma(acc[t], s0, ws_a, xs, min_a, xr[t].term[b * 8 + 2 * j]);
          acc[t] = group_fma(acc[t], s1, ws_b, xs, min_b, xr[t].term[b * 8 + 2 * j + 1]);
        } else {
          acc[t] = group_fma(acc[t], _mm512_add_epi32(s0, s1), ws_a, xs, min_a, xr[t].term[b * 4 + j]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + (i0 + t) * w.rows + tile * kAffineTileRows, acc[t]);
}

// C tiles 0, 1: 16 x rows x 16 weight rows (int32); A tiles 2, 3: 16 x rows x one group of
// codes' columns; B tiles 4, 5: the group's codes (columns / 4 rows of 16 weight rows x 4).
// Static: GCC 12 drops the stores of a local configuration before ldtilecfg.
const kernels_internal::AmxTileConfig& amx_config(int64_t group_cols) {
  static const auto make = [](int cols) {
    kernels_internal::AmxTileConfig c;
    c.set(0, 16, 64);
    c.set(1, 16, 64);
    c.set(2, 16, cols);
    c.set(3, 16, cols);
    c.set(4, cols / 4, 64);
    c.set(5, cols / 4, 64);
    return c;
  };
  static const kernels_internal::AmxTileConfig g32 = make(32), g16 = make(16);
  return group_cols == 16 ? g16 : g32;
}

// The 4-bit codes of tile blocks [c0, c1) as the 8-bit layout's bytes (looked up), 2,048 per block.
template <DType T>
DENSA_TARGET_AVX512_VNNI_INLINE void unpack_nibbles(const uint8_t* base, int64_t c0, int64_t c1, uint8_t* out) {
  const __m512i lut = nibble_lut<T>();
  for (int64_t b = c0; b < c1; ++b) {
    const uint8_t* blk = base + b * Fmt<T>::kTileBlockBytes;
    uint8_t* o = out + (b - c0) * 2048;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512i wv[8];
      group_codes<T>(blk, j, lut, wv);
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) _mm512_store_si512(o + 512 * j + 64 * q, wv[q]);
    }
  }
}

// A group's C tile (stored at c: x row t's 16 sums at c + 16 t) into the 16 x rows' accumulators.
template <DType T>
DENSA_TARGET_AVX512_VNNI_AMX_INT8 __attribute__((always_inline)) inline void amx_epilogue(const int32_t* c, const uint8_t* blk, int g,
                                                const float* xs, const float* term,
                                                int64_t step, __m512 (&acc)[16]) {
  __m512 ws, mins;
  group_scales<T>(blk, g, ws, mins);
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) acc[t] = group_fma(acc[t], _mm512_load_si512(c + 16 * t), ws, xs[t * step], mins, term[t * step]);
}

// x rows [0, n16) (a multiple of 16) against 16-row tile `tile` on AMX-INT8 (configured by the caller).
template <DType T>
DENSA_TARGET_AVX512_VNNI_AMX_INT8 void amx_tile(const WeightView& w, const uint8_t* xp, int64_t x_stride, float* y, int64_t tile,
                                                int64_t n16) {
  using F = Fmt<T>;
  constexpr int64_t kG = F::kGroupCols;
  constexpr int kPerBlock = F::kGroups;
  const int64_t blocks = w.cols / kAffineBlock;
  const uint8_t* base = tile_base(w, tile, F::kTileBlockBytes);
  const int64_t step = x_stride / 4;  // x scale / term of x row t at [t * step]
  alignas(64) uint8_t unpacked[F::kNibbles ? kChunkBlocks * 2048 : 64];
  alignas(64) int32_t cbuf[2][256];
  for (int64_t c0 = 0; c0 < blocks; c0 += kChunkBlocks) {
    const int64_t c1 = std::min(blocks, c0 + kChunkBlocks);
    if constexpr (F::kNibbles) unpack_nibbles<T>(base, c0, c1, unpacked);
    DENSA_MEMORY_BARRIER();  // the unpacked codes are stored before the tile loads read them
    // Group gi of the chunk: its tile block (scales), and its codes as the B tile.
    const auto block_of = [&](int64_t gi) { return base + (c0 + gi / kPerBlock) * F::kTileBlockBytes; };
    const auto codes = [&](int64_t gi) -> const uint8_t* {
      const int64_t g = gi % kPerBlock;
      if constexpr (F::kNibbles) return unpacked + gi / kPerBlock * 2048 + g * 512;
      return F::kG16 ? block_of(gi) + g / 2 * 512 + g % 2 * 256 : block_of(gi) + g * 512;
    };
    const int64_t ng = (c1 - c0) * kPerBlock;
    for (int64_t i0 = 0; i0 < n16; i0 += 16) {
      float* yt = y + i0 * w.rows + tile * kAffineTileRows;
      __m512 acc[16];
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) acc[t] = c0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(yt + t * w.rows);
      const AffineXRow x0 = affine_x_row(xp, x_stride, w.cols, i0);
      const int8_t* xq = x0.q + c0 * kAffineBlock;
      const float* xs = x0.xs + c0 * 4;
      const float* term = x0.term + c0 * kPerBlock;
      _tile_loadd(2, xq, x_stride);
      _tile_loadd(4, codes(0), 64);
      _tile_zero(0);
      _tile_dpbsud(0, 2, 4);
      _tile_stored(0, cbuf[0], 64);
      for (int64_t gi = 0; gi < ng; gi += 2) {  // ng is even (4 or 8 groups per block)
        _tile_loadd(3, xq + (gi + 1) * kG, x_stride);
        _tile_loadd(5, codes(gi + 1), 64);
        _tile_zero(1);
        _tile_dpbsud(1, 3, 5);
        DENSA_MEMORY_BARRIER();
        amx_epilogue<T>(cbuf[0], block_of(gi), static_cast<int>(gi % kPerBlock), xs + gi * kG / 32, term + gi, step,
                        acc);
        _tile_stored(1, cbuf[1], 64);
        if (gi + 2 < ng) {
          _tile_loadd(2, xq + (gi + 2) * kG, x_stride);
          _tile_loadd(4, codes(gi + 2), 64);
          _tile_zero(0);
          _tile_dpbsud(0, 2, 4);
        }
        DENSA_MEMORY_BARRIER();
        amx_epilogue<T>(cbuf[1], block_of(gi + 1), static_cast<int>((gi + 1) % kPerBlock), xs + (gi + 1) * kG / 32,
                        term + gi + 1, step, acc);
        if (gi + 2 < ng) _tile_stored(0, cbuf[0], 64);
        DENSA_MEMORY_BARRIER();
      }
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) _mm512_storeu_ps(yt + t * w.rows, acc[t]);
    }
    DENSA_MEMORY_BARRIER();  // the tile loads of this chunk's codes come before the next unpack
  }
}

DENSA_TARGET_AVX512_VNNI_AMX_INT8 void amx_begin(int64_t group_cols) { _tile_loadconfig(&amx_config(group_cols)); }
DENSA_TARGET_AVX512_VNNI_AMX_INT8 void amx_end() { _tile_release(); }

template <DType T>
DENSA_TARGET_AVX512_VNNI void rows_dtype(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y,
                                         int64_t r_begin, int64_t r_end) {
  const bool amx = n >= 16 && matmul_quant_int8_amx_usable(w.amx);
  const int64_t n16 = amx ? n / 16 * 16 : 0;
  if (amx) amx_begin(Fmt<T>::kGroupCols);
  for (int64_t tile = r_begin / kAffineTileRows; tile < r_end / kAffineTileRows; ++tile) {
    if (n == 1) {
      vnni_tile<T, 1, true>(w, xp, x_stride, y, tile, 0);
      continue;
    }
    if (amx) amx_tile<T>(w, xp, x_stride, y, tile, n16);
    int64_t i = n16;
    for (; i + 4 <= n; i += 4) vnni_tile<T, 4, false>(w, xp, x_stride, y, tile, i);
    for (; i < n; ++i) vnni_tile<T, 1, false>(w, xp, x_stride, y, tile, i);
  }
  if (amx) amx_end();
}

// The exact sums of 64 int8 q in groups of `group` (16 or 32) columns: sums[64 / group].
DENSA_TARGET_AVX512_VNNI void group_sums64(const int8_t* q, int64_t group, int32_t* sums) {
  // q + 128 as unsigned bytes, summed 8 at a time by vpsadbw, less 128 per element.
  const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(q), _mm512_set1_epi8(static_cast<char>(0x80)));
  alignas(64) int64_t part[8];
  _mm512_store_si512(part, _mm512_sad_epu8(u, _mm512_setzero_si512()));
  const int per = static_cast<int>(group / 8);
  for (int j = 0; j < 8 / per; ++j) {
    int64_t s = 0;
    for (int p = 0; p < per; ++p) s += part[j * per + p];
    sums[j] = static_cast<int32_t>(s - 128 * group);
  }
}

}  // namespace

int64_t affine_tiles_x_stride(DType t, int64_t cols) {
  return (cols + 4 * (cols / kActQ8Block) + 4 * (cols / affine_group(t)) + 63) / 64 * 64;
}

void affine_tiles_prepare_x(const float* x, int64_t cols, DType t, uint8_t* out) {
  CHECK(is_affine_rows(t) && cols % kAffineBlock == 0) << "affine tiles x: " << dtype_name(t) << ", cols " << cols;
  auto* q = reinterpret_cast<int8_t*>(out);
  auto* xs = reinterpret_cast<float*>(out + cols);
  auto* term = xs + cols / kActQ8Block;
  activation_q8_quantize_avx512(x, cols, q, xs);
  const int64_t group = affine_group(t);
  for (int64_t k0 = 0; k0 < cols; k0 += 64) {
    int32_t sums[4];
    group_sums64(q + k0, group, sums);
    for (int64_t j = 0; j < 64 / group; ++j) {
      const int64_t g = k0 / group + j;
      term[g] = xs[g * group / kActQ8Block] * static_cast<float>(sums[j]);
    }
  }
}

void affine_tiles_rows_avx512(const WeightView& w, const uint8_t* xp, int64_t x_stride, int64_t n, float* y,
                              int64_t r_begin, int64_t r_end) {
  CHECK(w.layout == WeightLayout::kAffineTiles16 && r_begin % kAffineTileRows == 0 && r_end % kAffineTileRows == 0)
      << "affine tiles: rows " << r_begin << ".." << r_end;
  const bool known = visit_affine_dtype(
      w.dtype, [&](auto t) { rows_dtype<decltype(t)::value>(w, xp, x_stride, n, y, r_begin, r_end); });
  CHECK(known) << "affine tiles: dtype " << dtype_name(w.dtype);
}

}  // namespace densa::matmul_internal
