#include "kv/contiguous_kv_cache.h"

#include <cmath>
#include <cstring>

#include "core/check.h"

namespace densa {

ContiguousKvCache::ContiguousKvCache(int num_layers, int num_kv_heads, int head_dim,
                                     int max_tokens, int num_seqs, DType dtype,
                                     KvScaleMode scale_mode, std::span<const float> static_scales)
    : ContiguousKvCache(KvLayout{num_layers, num_kv_heads, head_dim, max_tokens, dtype, scale_mode}, num_seqs,
                        static_scales) {}

ContiguousKvCache::ContiguousKvCache(const KvLayout& layout, int num_seqs, std::span<const float> static_scales) {
  const int num_layers = layout.num_layers, num_kv_heads = layout.num_kv_heads;
  const DType dtype = layout.dtype;
  const KvScaleMode scale_mode = layout.scale_mode;
  if (dtype == DType::kFP8E4M3) {
    CHECK(scale_mode != KvScaleMode::kNone) << "fp8 KV cache needs static or dynamic scales";
  } else {
    CHECK(dtype == DType::kF32 || dtype == DType::kBF16) << "contiguous cache holds f32, bf16 or fp8";
    CHECK(scale_mode == KvScaleMode::kNone) << "only an fp8 KV cache takes scales";
  }
  if (scale_mode == KvScaleMode::kStatic) {
    const int scale_heads = layout.is_latent() ? 1 : num_kv_heads;  // latent: [layer][c_kv | k_pe]
    CHECK(static_scales.size() == static_cast<size_t>(num_layers) * 2 * scale_heads)
        << "static kv scales: " << static_scales.size() << " values";
    for (float s : static_scales) CHECK(std::isfinite(s) && s > 0.0f) << "static kv scale " << s;
    static_scales_.assign(static_scales.begin(), static_scales.end());
  }
  layout_ = layout;
  const int64_t bytes = layout_.page_bytes() * num_seqs;
  data_ = std::make_unique<uint8_t[]>(static_cast<size_t>(bytes));
  std::memset(data_.get(), 0, static_cast<size_t>(bytes));
  for (int s = 0; s < num_seqs; ++s) {
    block_table_.push_back(s);
    block_offsets_.push_back(s);
  }
  block_offsets_.push_back(num_seqs);
}

KvView ContiguousKvCache::view() const {
  KvView v;
  v.layout = layout_;
  v.pool = data_.get();
  v.block_table = block_table_;
  v.block_offsets = block_offsets_;
  v.static_scales = static_scales_.empty() ? nullptr : static_scales_.data();
  return v;
}

}  // namespace densa
