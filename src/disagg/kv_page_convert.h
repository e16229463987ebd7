#pragma once
// convert_kv_page: rewrites one KV page from the sender's storage format into the receiver's
// (the "precision per role" step: e.g. a BF16 prefill page becomes an FP8 decode page with
// the decode side's scales before it leaves, halving the bytes on the wire). Every row goes
// through f32 and is stored exactly as kernels' kv_store would store that f32 row: F32 copy,
// BF16 round-to-nearest-even, FP8 with the static (layer, k|v, head) scale or a dynamic
// per-row scale amax / 448 kept beside the page. Equal formats copy rows unchanged.
#include <cstdint>
#include <span>

#include "kernels/kv_view.h"

namespace densa::disagg {

// A page format: layout + static scales [layer][k|v][kv_head] when fp8 static.
struct KvPageFormat {
  KvLayout layout;
  std::span<const float> static_scales;
};

// Preconditions: both formats share num_layers, num_kv_heads, head_dim and page_size
// (check_compatible), 0 <= num_tokens <= page_size, dst holds to.layout.page_bytes().
// Slots [num_tokens, page_size) of dst are zero (and their dynamic scales 0).
void convert_kv_page(const KvPageFormat& from, const uint8_t* src, const KvPageFormat& to, int32_t num_tokens,
                     uint8_t* dst);

// True when convert_kv_page copies rows byte for byte (same dtype, mode and scales).
bool same_kv_format(const KvPageFormat& a, const KvPageFormat& b);

}  // namespace densa::disagg
