#pragma once
// MXFP4 as GGUF stores it (ggml type 39, OCP microscaling FP4): blocks of 32 = one E8M0 shared
// exponent byte e, then 16 bytes of FP4 E2M1 nibbles (byte j: element j low, j + 16 high).
// E2M1 codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and codes 8..15 their negatives; ggml holds
// them doubled as int8 (kMxfp4Grid) and scales by 2^(e - 128) (mxfp4_half_scale), so
// value = grid[q] * 2^(e - 128) = e2m1(q) * 2^(e - 127). e = 0 and 1 give the f32 subnormals
// 2^-128 and 2^-127; e = 255 gives 2^127 (ggml has no NaN scale). The dequantizer is bit-equal
// to ggml's dequantize_row_mxfp4. `n` counts elements (a multiple of 32).
#include <cstdint>

namespace densa {

inline constexpr int8_t kMxfp4Grid[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) as f32, exactly.
float mxfp4_half_scale(uint8_t e);

void dequantize_mxfp4(const uint8_t* blocks, int64_t n, float* out);

// Simple reference quantizer: the smallest e with amax <= 12 * 2^(e - 128) (no element
// clipped), then the nearest grid level per element: |error| <= 2 * 2^(e - 128).
void quantize_row_mxfp4(const float* in, int64_t n, uint8_t* out);

}  // namespace densa
