#include "quant/ggml_blocks.h"

#include "quant/ggml_iq4.h"
#include "quant/ggml_kquants.h"
#include "quant/ggml_kquants_quantize.h"
#include "quant/ggml_legacy.h"
#include "quant/mxfp4.h"

namespace densa {
namespace {

constexpr GgmlBlockFormat kFormats[] = {
    {ggml_type::kQ4_1, "q4_1", 32, 20, dequantize_q4_1, quantize_row_q4_1},
    {ggml_type::kQ5_0, "q5_0", 32, 22, dequantize_q5_0, quantize_row_q5_0},
    {ggml_type::kQ5_1, "q5_1", 32, 24, dequantize_q5_1, quantize_row_q5_1},
    {ggml_type::kQ2_K, "q2_K", 256, 84, dequantize_q2_k, quantize_row_q2_k},
    {ggml_type::kQ3_K, "q3_K", 256, 110, dequantize_q3_k, quantize_row_q3_k},
    {ggml_type::kQ4_K, "q4_K", 256, 144, dequantize_q4_k, quantize_row_q4_k},
    {ggml_type::kQ5_K, "q5_K", 256, 176, dequantize_q5_k, quantize_row_q5_k},
    {ggml_type::kQ6_K, "q6_K", 256, 210, dequantize_q6_k, quantize_row_q6_k},
    {ggml_type::kIQ4_NL, "iq4_nl", 32, 18, dequantize_iq4_nl, quantize_row_iq4_nl},
    {ggml_type::kIQ4_XS, "iq4_xs", 256, 136, dequantize_iq4_xs, quantize_row_iq4_xs},
    {ggml_type::kMXFP4, "mxfp4", 32, 17, dequantize_mxfp4, quantize_row_mxfp4},
};

}  // namespace

std::span<const GgmlBlockFormat> ggml_block_formats() { return kFormats; }

const GgmlBlockFormat* ggml_block_format(uint32_t type) {
  for (const GgmlBlockFormat& f : kFormats) {
    if (f.type == type) return &f;
  }
  return nullptr;
}

}  // namespace densa
