#include "kv/contiguous_kv_cache.h"

#include <cstring>

#include "core/check.h"

namespace densa {

ContiguousKvCache::ContiguousKvCache(int num_layers, int num_kv_heads, int head_dim,
                                     int max_tokens, int num_seqs, DType dtype) {
  CHECK(dtype == DType::kF32 || dtype == DType::kBF16) << "contiguous cache holds f32 or bf16";
  layout_ = KvLayout{num_layers, num_kv_heads, head_dim, max_tokens, dtype, KvScaleMode::kNone};
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
  return v;
}

}  // namespace densa
