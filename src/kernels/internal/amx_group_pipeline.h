#pragma once
// The AMX-INT8 loop the 16-row tile kernels share (INT8, INT4 and affine 16-row tiles): for
// groups g = 0 .. ng - 1 in order, C(g) = A(g) x B(g) (16 x rows x one group of columns, against
// the group's codes as the B tile), each C stored and handed to the caller's epilogue, which folds
// it into its fp32 accumulators. The group's scales make every C a separate product, so a tile
// store and sixteen vector loads follow every tile product; how they are ordered is what this
// loop is about.
//
// Order (two tiles of each kind; tiles 0, 1: C; 2, 3: A; 4, 5: B, as the caller configured):
//   issue(g + 1) -> store C(g) -> epilogue(g - 1)
// so a tile product has one epilogue's time before its store waits on it, and the epilogue reads
// a C stored one epilogue earlier. The loads of a C straight after its tile store (the simple
// order) stalled on the store, and ran the INT8 GEMM at a fraction of the tile unit's rate.
// Results do not depend on the order: each epilogue sees the same C and runs in group order.
#include <immintrin.h>

#include <cstdint>

#include "kernels/internal/amx_tile.h"
#include "kernels/internal/target.h"

namespace densa::kernels_internal {

// G provides: const void* a(int64_t g) (the x tile's first row; rows a_stride bytes apart),
// const void* b(int64_t g) (the B tile, rows 64 bytes apart), and
// void epilogue(const int32_t* c, int64_t g) (C(g) stored at c: x row t's 16 sums at c + 16 t).
// kSigned: the codes are int8 (tdpbssd) rather than uint8 (tdpbsud). ng must be even and > 0.
template <bool kSigned, class G>
DENSA_TARGET_AVX512_QUANT_AMX_INT8 __attribute__((always_inline)) inline void amx_group_pipeline(int64_t ng,
                                                                                             int64_t a_stride, G& gs) {
#define DENSA_AMX_GROUP_ISSUE(C, A, B, g)  \
  _tile_loadd(A, gs.a(g), a_stride);       \
  _tile_loadd(B, gs.b(g), 64);             \
  _tile_zero(C);                           \
  if constexpr (kSigned) {                 \
    _tile_dpbssd(C, A, B);                 \
  } else {                                 \
    _tile_dpbsud(C, A, B);                 \
  }
  alignas(64) int32_t cbuf[2][256];
  DENSA_AMX_GROUP_ISSUE(0, 2, 4, 0);
  for (int64_t g = 0; g < ng; g += 2) {
    DENSA_AMX_GROUP_ISSUE(1, 3, 5, g + 1);
    _tile_stored(0, cbuf[0], 64);
    DENSA_MEMORY_BARRIER();
    if (g > 0) gs.epilogue(cbuf[1], g - 1);
    if (g + 2 < ng) {
      DENSA_AMX_GROUP_ISSUE(0, 2, 4, g + 2);
    }
    _tile_stored(1, cbuf[1], 64);
    DENSA_MEMORY_BARRIER();
    gs.epilogue(cbuf[0], g);
    DENSA_MEMORY_BARRIER();
  }
  gs.epilogue(cbuf[1], ng - 1);
#undef DENSA_AMX_GROUP_ISSUE
}

}  // namespace densa::kernels_internal
