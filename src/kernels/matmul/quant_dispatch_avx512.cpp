// The AVX-512 quantized matmul's entry points (kernels/internal/matmul_quant_avx512.h): which
// views and paths run here, and the dispatch of row ranges to the kernels of
// kernels/internal/matmul_quant_avx512_kernels.h.

// GCC 12 false positives on the intrinsics' placeholders (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/internal/matmul_quant_avx512_kernels.h"

namespace densa::matmul_internal {
namespace {

void rows(const Args& a, int64_t n, int64_t r_begin, int64_t r_end, WorkerScratch& ws) {
  if (a.w->layout == WeightLayout::kAffineTiles16) {
    return affine_tiles_rows_avx512(*a.w, a.xp, a.x_stride, n, a.y, r_begin, r_end);
  }
  if (is_affine_rows(a.w->dtype)) return affine_rows_avx512(*a.w, a.xp, a.x_stride, n, a.y, r_begin, r_end);
  if (a.w->layout == WeightLayout::kInt8Tiles16) return int8_tiles_rows(a, n, r_begin, r_end);
  if (a.w->layout == WeightLayout::kInt4Tiles8) return int4_tiles_rows(a, n, r_begin, r_end);
  if (a.w->layout == WeightLayout::kInt4Tiles16) return int4_tiles16_rows(a, n, r_begin, r_end);
  if (a.w->dtype == DType::kFP8E4M3) return fp8_rows(a, n, r_begin, r_end, ws);
  if (a.w->dtype == DType::kI8) return int8_rows(a, n, r_begin, r_end);
  return int4_rows(a, n, r_begin, r_end);
}

bool have_vbmi() {
  static const bool v = __builtin_cpu_supports("avx512vbmi");
  return v;
}

bool have_gfni() {
  static const bool v = __builtin_cpu_supports("gfni");
  return v;
}

}  // namespace

bool quant_on_amx(const WeightView& w) {
  return (w.dtype == DType::kFP8E4M3 && matmul_quant_fp8_amx(w.amx)) ||
         (half_float(w.dtype) && matmul_quant_bf16_amx(w.amx));
}

bool matmul_quant_avx512_supports(const WeightView& w) {
  if (half_float(w.dtype)) return w.layout == WeightLayout::kRows && matmul_quant_bf16_amx(w.amx);
  if (is_affine_rows(w.dtype)) {  // GGUF K-quants / IQ4 / MXFP4 repacked (kernels/internal/matmul_affine.h)
    const bool layout = w.layout == WeightLayout::kRows ||
                        (w.layout == WeightLayout::kAffineTiles16 && w.rows % kAffineTileRows == 0);
    return layout && w.cols % kAffineBlock == 0 &&
           static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16);
  }
  if (w.scale_rows <= 0 || w.scale_cols <= 0) return false;
  if (static_cast<int>(cpu_isa_hardware()) < static_cast<int>(CpuIsa::kAvx512Bf16)) return false;
  if (w.dtype == DType::kFP8E4M3) return w.scales_f32 != nullptr && have_vbmi() && w.scale_cols % kFp8Step == 0;
  if (w.dtype == DType::kI8) {  // GGUF Q8_0 repacked: f16 scales per 32
    if (w.layout == WeightLayout::kInt8Tiles16) return w.rows % 16 == 0 && w.cols % kInt8TileCols == 0;
    if (w.layout != WeightLayout::kRows) return false;
    return w.scales_f16 != nullptr && w.scale_rows == 1 && w.scale_cols == kActQ8Block && w.cols % kActQ8Block == 0;
  }
  if (w.dtype == DType::kI4) {
    if ((w.scales_bf16 == nullptr) == (w.scales_f16 == nullptr)) return false;  // exactly one scale format
    if (w.layout == WeightLayout::kInt4Tiles8) return matmul_quant_avx512_int4_tiles_supported();
    if (w.layout == WeightLayout::kInt4Tiles16) {
      return matmul_quant_avx512_int8_tiles_supported() && w.scale_cols == 32 && w.rows % 16 == 0 &&
             w.cols % kInt4Tile16Cols == 0;
    }
    const int64_t g = w.scale_cols;
    return w.scale_rows == 1 && g % 32 == 0 && w.cols % g == 0 && (kInt4Chunk % g == 0 || g % kInt4Chunk == 0);
  }
  return false;
}

bool matmul_quant_avx512_int8_tiles_supported() {
  return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16);
}

bool matmul_quant_int8_amx_usable(AmxUse use) {
  switch (use) {
    case AmxUse::kOff: return false;
    case AmxUse::kOn:
      CHECK(cpu_has_amx_int8() && cpu_use_amx()) << "matmul: AMX-INT8 asked for without it";
      return true;
    case AmxUse::kAuto: break;
  }
  return cpu_use_amx() && cpu_has_amx_int8();
}

bool matmul_quant_avx512_int4_tiles_supported() {
  return static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16) && have_vbmi() && have_gfni();
}

namespace {

// The AMX-BF16 tile path as a weight asks for it: kOff never, kOn always (a CHECK that the CPU
// has AMX-BF16), kAuto where `automatic` says.
bool amx_bf16_path(AmxUse use, bool automatic) {
  switch (use) {
    case AmxUse::kOff: return false;
    case AmxUse::kOn:
      CHECK(cpu_has_amx_bf16()) << "matmul: AMX asked for without AMX-BF16";
      return true;
    case AmxUse::kAuto: break;
  }
  return automatic;
}

}  // namespace

bool matmul_quant_fp8_amx(AmxUse use) { return amx_bf16_path(use, cpu_use_amx()); }

bool matmul_quant_bf16_amx(AmxUse use) {
  const bool bf16_isa = static_cast<int>(cpu_isa_hardware()) >= static_cast<int>(CpuIsa::kAvx512Bf16);
  return amx_bf16_path(use, cpu_use_amx() && bf16_isa);
}

void matmul_quant_avx512_rows(const WeightView& w, const uint8_t* xp, int64_t n, float* y, int64_t r_begin,
                              int64_t r_end, WorkerScratch& ws) {
  if (n <= 0 || r_begin >= r_end) return;
  if (quant_on_amx(w)) return amx_rows(w, xp, n, y, r_begin, r_end, ws);  // blocks x itself
  // A GEMM sweeps all its x rows once per weight row tile. With many x rows (a prefill step of
  // many prompts: 8,192 x 1,024 columns is 16 MB prepared) that sweep runs from L3 or DRAM for
  // every tile, so x is taken in blocks of ~kXBlockBytes that stay in L2, and the thread's
  // weight rows are streamed once per block instead. Blocks are whole x tiles (multiples of 6
  // rows); tiles only interleave independent (i, r) chains, so blocking changes no result.
  const int64_t stride = x_stride(w);
  // Whole x tiles: 6 rows (4 x 3 or 2 x 3 register tiles); the INT8 and affine 16-row tile
  // layouts: 48 (three AMX blocks of 16, twelve VNNI tiles of 4).
  const bool tiles16 = w.layout == WeightLayout::kInt8Tiles16 || w.layout == WeightLayout::kInt4Tiles16 ||
                       w.layout == WeightLayout::kAffineTiles16;
  const int64_t tile_x = tiles16 ? 48 : 6;
  const int64_t block = std::max<int64_t>(tile_x, kXBlockBytes / stride / tile_x * tile_x);
  for (int64_t i0 = 0; i0 < n; i0 += block) {
    const Args a{&w, xp + i0 * stride, stride, y + i0 * w.rows};
    rows(a, std::min(block, n - i0), r_begin, r_end, ws);
  }
}

bool matmul_quant_avx512_same_x_layout(const WeightView& a, const WeightView& b) {
  // The preparation reads w only for its dtype, cols, layout and (FP8) which path runs.
  const auto own_x = [](const WeightView& w) {  // the tile layouts with their own x layout
    return w.layout == WeightLayout::kInt8Tiles16 || w.layout == WeightLayout::kInt4Tiles16 ||
           w.layout == WeightLayout::kAffineTiles16;
  };
  return a.dtype == b.dtype && a.cols == b.cols && own_x(a) == own_x(b) && quant_on_amx(a) == quant_on_amx(b);
}

int64_t matmul_quant_avx512_row_cost(const WeightView& w, int64_t n) { return w.row_bytes() + n * w.cols / 4; }

}  // namespace densa::matmul_internal
