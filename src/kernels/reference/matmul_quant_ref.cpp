#include "kernels/reference/matmul_quant_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "quant/activation_q8.h"
#include "quant/affine_rows.h"
#include "quant/affine_tiles.h"
#include "quant/dequantize.h"
#include "quant/int4_group.h"
#include "quant/int8_group.h"

namespace densa::ref {
namespace {

// row(i, q, sx) for every x row i, quantized by activation_q8_quantize (int8 q, block scales).
template <typename Row>
void for_each_q8_row(const float* x, int64_t n, int64_t cols, const Row& row) {
  std::vector<int8_t> q(static_cast<size_t>(cols));
  std::vector<float> sx(static_cast<size_t>(activation_q8_num_blocks(cols)));
  for (int64_t i = 0; i < n; ++i) {
    activation_q8_quantize(x + i * cols, cols, q.data(), sx.data());
    row(i, q, sx);
  }
}

// The exact sum of INT8 code * q over columns [k0, k1) of weight row r (either layout).
int64_t int8_dot(const WeightView& w, int64_t r, const std::vector<int8_t>& q, int64_t k0, int64_t k1) {
  int64_t sum = 0;
  for (int64_t k = k0; k < k1; ++k) sum += static_cast<int64_t>(int8_group_code(w, r, k)) * q[static_cast<size_t>(k)];
  return sum;
}

// Block b of row r (either affine layout): its 128 codes in column order and its group scales and mins.
void affine_block_values(const WeightView& w, int64_t r, int64_t b, uint8_t* codes, float* scale, float* min) {
  uint8_t block[256];
  affine_row_block(w, r, b, block);
  affine_block_codes(w.dtype, block, 0, codes);
  affine_block_scales(w.dtype, block, 0, scale, min);
}

}  // namespace

void matmul_fp8_x_bf16(const WeightView& w, const float* x, int64_t n, float* y) {
  CHECK(w.dtype == DType::kFP8E4M3) << "matmul_fp8_x_bf16: dtype " << dtype_name(w.dtype);
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t i = 0; i < n; ++i) {
      double acc = 0.0;
      for (int64_t k = 0; k < w.cols; ++k) acc += static_cast<double>(row[k]) * bf16_to_f32(f32_to_bf16(x[i * w.cols + k]));
      y[i * w.rows + r] = static_cast<float>(acc);
    }
  }
}

void matmul_fp8_scaled_x_bf16(const WeightView& w, const float* x, int64_t n, float* y) {
  CHECK(w.dtype == DType::kFP8E4M3) << "matmul_fp8_scaled_x_bf16: dtype " << dtype_name(w.dtype);
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (float& v : row) v = bf16_to_f32(f32_to_bf16(v));
    for (int64_t i = 0; i < n; ++i) {
      double acc = 0.0;
      for (int64_t k = 0; k < w.cols; ++k) acc += static_cast<double>(row[k]) * bf16_to_f32(f32_to_bf16(x[i * w.cols + k]));
      y[i * w.rows + r] = static_cast<float>(acc);
    }
  }
}

void matmul_int4_x_q8(const WeightView& w, const float* x, int64_t n, float* y) {
  CHECK(w.dtype == DType::kI4 && w.scale_rows == 1) << "matmul_int4_x_q8: dtype " << dtype_name(w.dtype);
  const int64_t cols = w.cols, g = w.scale_cols;
  for_each_q8_row(x, n, cols, [&](int64_t i, const std::vector<int8_t>& q, const std::vector<float>& sx) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double acc = 0.0;
      // Sum exact integer products over each (x block, weight group) intersection.
      for (int64_t k0 = 0; k0 < cols;) {
        const int64_t b = k0 / kActQ8Block, grp = k0 / g;
        const int64_t k1 = std::min({cols, (b + 1) * kActQ8Block, (grp + 1) * g});
        int64_t isum = 0;
        for (int64_t k = k0; k < k1; ++k) {
          const int nibble = int4_group_nibble(w, r, k);  // any layout
          isum += static_cast<int64_t>(nibble - 8) * q[static_cast<size_t>(k)];
        }
        const double ws = int4_group_scale(w, r, grp);
        acc += ws * sx[static_cast<size_t>(b)] * static_cast<double>(isum);
        k0 = k1;
      }
      y[i * w.rows + r] = static_cast<float>(acc);
    }
  });
}

void matmul_int8_x_q8(const WeightView& w, const float* x, int64_t n, float* y) {
  CHECK(w.dtype == DType::kI8 && w.scale_rows == 1 && w.scale_cols == kActQ8Block && w.scales_f16 != nullptr)
      << "matmul_int8_x_q8: dtype " << dtype_name(w.dtype) << ", group " << w.scale_cols;
  const int64_t cols = w.cols;
  for_each_q8_row(x, n, cols, [&](int64_t i, const std::vector<int8_t>& q, const std::vector<float>& sx) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double acc = 0.0;
      for (int64_t b = 0; b * kActQ8Block < cols; ++b) {
        const int64_t isum = int8_dot(w, r, q, b * kActQ8Block, std::min(cols, (b + 1) * kActQ8Block));
        acc += static_cast<double>(int8_group_scale(w, r, b)) * sx[static_cast<size_t>(b)] * static_cast<double>(isum);
      }
      y[i * w.rows + r] = static_cast<float>(acc);
    }
  });
}

void matmul_int8_groups_fp32(const WeightView& w, const float* x, int64_t n, float* y) {
  const bool int4 = w.dtype == DType::kI4;
  CHECK((w.dtype == DType::kI8 || int4) && w.scale_cols == kActQ8Block && w.cols % kActQ8Block == 0)
      << "matmul_int8_groups_fp32: dtype " << dtype_name(w.dtype) << ", group " << w.scale_cols << ", cols " << w.cols;
  const auto dot = [&](int64_t r, const std::vector<int8_t>& q, int64_t k0, int64_t k1) {
    if (!int4) return int8_dot(w, r, q, k0, k1);
    int64_t sum = 0;
    for (int64_t k = k0; k < k1; ++k) sum += static_cast<int64_t>(int4_group_nibble(w, r, k) - 8) * q[static_cast<size_t>(k)];
    return sum;
  };
  for_each_q8_row(x, n, w.cols, [&](int64_t i, const std::vector<int8_t>& q, const std::vector<float>& sx) {
    for (int64_t r = 0; r < w.rows; ++r) {
      float acc = 0.0f;
      for (int64_t g = 0; g < w.cols / kActQ8Block; ++g) {
        // |sum| <= 32 * 128 * 128 < 2^24: exact as a float.
        const auto sum = static_cast<float>(dot(r, q, g * kActQ8Block, (g + 1) * kActQ8Block));
        const float ws = int4 ? int4_group_scale(w, r, g) : int8_group_scale(w, r, g);
        const float scale = ws * sx[static_cast<size_t>(g)];
        acc = std::fma(sum, scale, acc);
      }
      y[i * w.rows + r] = acc;
    }
  });
}

void matmul_affine_groups_fp32(const WeightView& w, const float* x, int64_t n, float* y) {
  CHECK(is_affine_rows(w.dtype) && w.cols % kAffineBlock == 0)
      << "matmul_affine_groups_fp32: dtype " << dtype_name(w.dtype) << ", cols " << w.cols;
  const int64_t group = affine_group(w.dtype), groups = affine_groups_per_block(w.dtype);
  for_each_q8_row(x, n, w.cols, [&](int64_t i, const std::vector<int8_t>& q, const std::vector<float>& sx) {
    for (int64_t r = 0; r < w.rows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < w.cols / kAffineBlock; ++b) {
        uint8_t codes[kAffineBlock];
        float scale[8], min[8];
        affine_block_values(w, r, b, codes, scale, min);
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t k0 = b * kAffineBlock + g * group;
          int32_t s = 0, qsum = 0;
          for (int64_t k = k0; k < k0 + group; ++k) {
            s += static_cast<int32_t>(codes[k - b * kAffineBlock]) * q[static_cast<size_t>(k)];
            qsum += q[static_cast<size_t>(k)];
          }
          const float xs = sx[static_cast<size_t>(k0 / kActQ8Block)];
          acc = std::fma(static_cast<float>(s), scale[g] * xs, acc);
          acc = std::fma(min[g], xs * static_cast<float>(qsum), acc);
        }
      }
      y[i * w.rows + r] = acc;
    }
  });
}

void matmul_affine_lanes_fp32(const WeightView& w, const float* x, int64_t n, float* y) {
  CHECK(is_affine_rows(w.dtype) && w.cols % kAffineBlock == 0)
      << "matmul_affine_lanes_fp32: dtype " << dtype_name(w.dtype) << ", cols " << w.cols;
  const bool g16 = w.dtype == DType::kA8K16;
  const int64_t group = affine_group(w.dtype), groups = affine_groups_per_block(w.dtype);
  for_each_q8_row(x, n, w.cols, [&](int64_t i, const std::vector<int8_t>& q, const std::vector<float>& sx) {
    for (int64_t r = 0; r < w.rows; ++r) {
      float acc[16] = {};
      for (int64_t b = 0; b < w.cols / kAffineBlock; ++b) {
        uint8_t codes[kAffineBlock];
        float scale[8], min[8];
        affine_block_values(w, r, b, codes, scale, min);
        const int8_t* qb = q.data() + b * kAffineBlock;
        const float* xs = sx.data() + b * 4;
        auto dot4 = [&](int64_t k) {  // the exact sum over columns k .. k + 3 of the block
          int32_t s = 0;
          for (int64_t e = k; e < k + 4; ++e) s += static_cast<int32_t>(codes[e]) * qb[e];
          return s;
        };
        for (int l = 0; l < 16; ++l) {
          const int j = l / 4, t = l % 4;
          const int32_t s1 = dot4(32 * j + 4 * t), s2 = dot4(32 * j + 16 + 4 * t);
          if (g16) {
            acc[l] = std::fma(static_cast<float>(s1), scale[2 * j] * xs[j], acc[l]);
            acc[l] = std::fma(static_cast<float>(s2), scale[2 * j + 1] * xs[j], acc[l]);
          } else {
            acc[l] = std::fma(static_cast<float>(s1 + s2), scale[j] * xs[j], acc[l]);
          }
        }
        for (int l = 0; l < 16; ++l) {
          float m = 0.0f, term = 0.0f;
          if (l < groups) {
            int32_t sum = 0;
            for (int64_t k = group * l; k < group * (l + 1); ++k) sum += qb[k];
            m = min[l];
            term = xs[group * l / 32] * static_cast<float>(sum);
          }
          acc[l] = std::fma(m, term, acc[l]);
        }
      }
      // The kernel's hsum tree.
      float t8[8], t4[4];
      for (int l = 0; l < 8; ++l) t8[l] = acc[l] + acc[l + 8];
      for (int l = 0; l < 4; ++l) t4[l] = t8[l] + t8[l + 4];
      y[i * w.rows + r] = (t4[0] + t4[2]) + (t4[1] + t4[3]);
    }
  });
}

void matmul_affine_x_q8(const WeightView& w, const float* x, int64_t n, float* y) {
  CHECK(is_affine_rows(w.dtype) && w.cols % kAffineBlock == 0) << "matmul_affine_x_q8: dtype " << dtype_name(w.dtype);
  const int64_t group = affine_group(w.dtype);
  for_each_q8_row(x, n, w.cols, [&](int64_t i, const std::vector<int8_t>& q, const std::vector<float>& sx) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double acc = 0.0;
      for (int64_t k = 0; k < w.cols; ++k) {
        const int64_t b = k / kAffineBlock, g = k % kAffineBlock / group;
        float scale[8], min[8];
        uint8_t codes[kAffineBlock];
        affine_block_values(w, r, b, codes, scale, min);
        const double wk = static_cast<double>(scale[g]) * codes[k % kAffineBlock] + min[g];
        acc += wk * static_cast<double>(sx[static_cast<size_t>(k / kActQ8Block)]) * q[static_cast<size_t>(k)];
      }
      y[i * w.rows + r] = static_cast<float>(acc);
    }
  });
}

}  // namespace densa::ref
