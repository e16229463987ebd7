// Affine rows (quant/affine_rows.h), the load-time conversion of GGUF K-quant / IQ4 / MXFP4
// blocks, and the W8A8 kernel that reads them. Input: a format byte (index into
// ggml_block_formats()), a flags byte (bit 0: 8-bit codes for all; bit 1: two rows), then the
// blocks of rows x 256 columns (zero-padded when short). Invariants for any bytes:
//  - a conversion that succeeds gives, for every element, the reference dequantizer's value
//    (ggml's, bit for bit; tests/quant) up to the sign of an exact zero;
//  - on AVX-512 VNNI the kernel equals its scalar twin bit for bit (NaN where the twin has NaN)
//    for a fixed x, including the extreme scales and codes fuzzed blocks reach;
//  - the rows repeated into one 16-row tile (quant/affine_tiles.h) read back the same blocks,
//    and the tile kernels (VNNI for 2 x rows, AMX-INT8 where granted for 16) equal their
//    per-group twin bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "fuzz_util.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/reference/matmul_quant_ref.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"
#include "quant/ggml_blocks.h"

namespace {

bool same_value(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y || (a == 0.0f && b == 0.0f) || (std::isnan(a) && std::isnan(b));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  if (size < 2) return 0;
  const auto formats = ggml_block_formats();
  const GgmlBlockFormat& fm = formats[data[0] % formats.size()];
  const AffineWidth width = (data[1] & 1) != 0 ? AffineWidth::kWide : AffineWidth::kPacked;
  const int64_t rows = 1 + ((data[1] >> 1) & 1), cols = 256;
  const int64_t n = rows * cols;
  std::vector<uint8_t> blocks(static_cast<size_t>(n / fm.block_elems * fm.block_bytes), 0);
  std::memcpy(blocks.data(), data + 2, std::min(blocks.size(), size - 2));
  const DType t = *affine_dtype_for_ggml(fm.type, width);
  std::vector<uint8_t> rows_bytes(static_cast<size_t>(rows * dtype_row_bytes(t, cols)));
  if (!affine_from_ggml(fm.type, t, blocks.data(), rows, cols, rows_bytes.data())) return 0;
  std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(cols));
  fm.dequantize(blocks.data(), n, want.data());
  for (int64_t r = 0; r < rows; ++r) {
    affine_dequantize(t, rows_bytes.data() + r * dtype_row_bytes(t, cols), 0, cols, got.data());
    for (int64_t k = 0; k < cols; ++k) FUZZ_ASSERT(same_value(got[k], want[r * cols + k]));
  }
  if (static_cast<int>(cpu_isa_hardware()) < static_cast<int>(CpuIsa::kAvx512Bf16)) return 0;
  WeightView w;
  w.dtype = t;
  w.rows = rows;
  w.cols = cols;
  w.data = rows_bytes.data();
  std::vector<float> x(static_cast<size_t>(2 * cols));
  for (int64_t k = 0; k < 2 * cols; ++k) x[k] = std::sin(0.37f * static_cast<float>(k)) * (k % 61 == 0 ? 50.0f : 1.0f);
  std::vector<float> y(static_cast<size_t>(2 * rows)), twin(y.size());
  matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, w, x.data(), 2, y.data(), nullptr);
  ref::matmul_affine_lanes_fp32(w, x.data(), 2, twin.data());
  for (size_t i = 0; i < y.size(); ++i) FUZZ_ASSERT(same_value(y[i], twin[i]));

  const int64_t rb = dtype_row_bytes(t, cols);
  std::vector<uint8_t> band(static_cast<size_t>(16 * rb) + 64);
  uint8_t* b0 = band.data() + (64 - reinterpret_cast<uintptr_t>(band.data()) % 64) % 64;
  for (int64_t r = 0; r < 16; ++r) std::memcpy(b0 + r * rb, rows_bytes.data() + r % rows * rb, static_cast<size_t>(rb));
  WeightView tw = w;
  tw.rows = 16;
  tw.data = b0;
  tw = affine_tile16_in_place(tw, b0);
  std::vector<uint8_t> block(static_cast<size_t>(dtype_block_bytes(t)));
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t b = 0; b < cols / kAffineBlock; ++b) {
      affine_row_block(tw, r, b, block.data());
      FUZZ_ASSERT(std::memcmp(block.data(), rows_bytes.data() + r % rows * rb + b * dtype_block_bytes(t), block.size()) == 0);
    }
  }
  std::vector<float> x16(static_cast<size_t>(16 * cols));
  for (int64_t k = 0; k < 16 * cols; ++k) x16[k] = x[k % (2 * cols)] * (1.0f + 0.01f * static_cast<float>(k / cols));
  for (int64_t nx : {2, 16}) {
    std::vector<float> ty(static_cast<size_t>(16 * nx)), ttwin(ty.size());
    matmul_internal::matmul_with_isa(CpuIsa::kAvx512Bf16, tw, x16.data(), nx, ty.data(), nullptr);
    ref::matmul_affine_groups_fp32(tw, x16.data(), nx, ttwin.data());
    for (size_t i = 0; i < ty.size(); ++i) FUZZ_ASSERT(same_value(ty[i], ttwin[i]));
  }
  return 0;
}
