#pragma once
// GGUF's non-linear 4-bit types (ggml types 20, 23): each 4-bit code indexes a fixed grid of
// 16 int8 levels, kIq4Grid, scaled by an f16 factor.
//   IQ4_NL (18 bytes per 32): f16 d, 16 bytes of nibbles (byte j: element j low, j + 16
//     high);  value = d * grid[q].
//   IQ4_XS (136 bytes per 256): f16 d, u16 scales_h, scales_l[4], qs[128]. Sub-block s (32
//     elements) has the 6-bit scale ls = ((scales_l[s/2] >> 4*(s%2)) & 15) |
//     (((scales_h >> 2s) & 3) << 4) and its 16 bytes of nibbles at qs[16 s] in IQ4_NL's order;
//     value = (d * (ls - 32)) * grid[q].
// Dequantizers compute in fp32 in ggml's operation order, so their values are bit-equal to
// ggml's dequantize_row_iq4_*. `n` counts elements.
#include <cstdint>

namespace densa {

inline constexpr int8_t kIq4Grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void dequantize_iq4_nl(const uint8_t* blocks, int64_t n, float* out);
void dequantize_iq4_xs(const uint8_t* blocks, int64_t n, float* out);

// Simple reference quantizers (not ggml's search): per 32 elements a signed scale s = -m / 127
// for the element m of largest magnitude, so every x / s lies in [-127, 127]; each element
// takes its nearest grid level. IQ4_XS rounds each sub-block's scale code away from zero
// (|d * (ls - 32)| >= |s|), d = max |s| / 32 rounded up to f16. |error| <= 14 |scale| (the
// widest half-gap of the grid is 12, the clip above 113 is 14). n % 32 (NL) / 256 (XS) == 0.
void quantize_row_iq4_nl(const float* in, int64_t n, uint8_t* out);
void quantize_row_iq4_xs(const float* in, int64_t n, uint8_t* out);

}  // namespace densa
