#pragma once
// Reference quantizers for GGUF's Q8_0 and Q4_0 blocks (32 elements per block, f16 scale d;
// layouts in core/dtype.h, decoders in quant/dequantize.h). The rounding follows ggml's
// reference quantizers so that files written here hold the blocks llama.cpp would write:
//   Q8_0: d = amax / 127, q = round-half-away(x / d) in [-127, 127].
//   Q4_0: m = the element of largest magnitude (signed), d = m / -8,
//         q = min(15, trunc(x / d + 8.5)) in [0, 15], value = (q - 8) * d.
// (ggml multiplies by 1/d rather than dividing; so do these.)
#include <cstdint>

namespace densa {

// in: [cols], out: cols / 32 blocks. Precondition: cols % 32 == 0.
void quantize_row_q8_0(const float* in, int64_t cols, uint8_t* out);
void quantize_row_q4_0(const float* in, int64_t cols, uint8_t* out);

}  // namespace densa
