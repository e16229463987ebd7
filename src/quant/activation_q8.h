#pragma once
// Int8 activations for the W4A8 (VNNI) INT4 matmul: each row of x is cut into blocks of
// kActQ8Block consecutive elements (the last one may be shorter); per block
// scale = amax(|x|) / 127 and q = clamp(round_half_even(x * (127 / amax)), -127, 127), so
// |x - q * scale| <= scale / 2 = amax / 254. An all-zero block has scale 0 and q 0, and so has a
// block too small for 127 / amax to be finite (amax < 127 / FLT_MAX, ~3.7e-37: every product
// with it is below fp32 precision of any other term, and x * (127 / amax) would be inf or NaN); a block
// holding a NaN or an infinity gets scale NaN (and q 0), so any product with it is NaN.
// All arithmetic is fp32 in this order, which the AVX-512 kernel reproduces bit for bit.
#include <cstdint>

namespace densa {

inline constexpr int64_t kActQ8Block = 32;

inline int64_t activation_q8_num_blocks(int64_t count) { return (count + kActQ8Block - 1) / kActQ8Block; }

// q: [count], scales: [activation_q8_num_blocks(count)].
void activation_q8_quantize(const float* x, int64_t count, int8_t* q, float* scales);

}  // namespace densa
