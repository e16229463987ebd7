#pragma once
// Combinations of a matrix's rows (fp32): y[t, :] = sum over r of x[t, r] * w[r, :]. The
// transposed product of matmul (kernels/matmul.h) for a matrix whose output runs along its
// rows; MLA's absorbed query (q_nope of a head times W_UK_h, model/mla_absorb.h) is one.
//
// Contract: every y[t, c] is acc = 0, then acc = fma(x[t, r], w[r, c], acc) for r = 0, 1, ...,
// rows - 1 in that order (one rounding per term). Whatever n, the other rows of x, or the ISA
// (the scalar loop uses std::fma), the result is the same bits.
#include <cstdint>

namespace densa {

// w: [rows, cols] row-major. Row t of x starts at x + t * x_stride (rows values), row t of y
// at y + t * y_stride (cols values).
void rows_combination(const float* w, int64_t rows, int64_t cols, const float* x, int64_t x_stride, int64_t n,
                      float* y, int64_t y_stride);

}  // namespace densa
