#pragma once
// ContiguousKvCache: the simplest KV store — one page per sequence covering the whole
// context, owned here. Used by single-sequence tools (generate, perplexity) and as the
// contiguous oracle for paged-attention tests. The engine uses PagePool instead.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/kv_view.h"

namespace densa {

class ContiguousKvCache {
 public:
  // Room for num_seqs sequences of up to max_tokens each. dtype kF32 / kBF16 take
  // scale_mode kNone; kFP8E4M3 takes kStatic (static_scales [layer][k|v][kv_head], copied,
  // each > 0) or kDynamic (scales stored per token beside the data).
  ContiguousKvCache(int num_layers, int num_kv_heads, int head_dim, int max_tokens, int num_seqs,
                    DType dtype, KvScaleMode scale_mode = KvScaleMode::kNone,
                    std::span<const float> static_scales = {});
  // Any layout (GQA or MLA latent), one page of layout.page_size tokens per sequence. An MLA
  // layout takes kNone (f32 / bf16) or kDynamic (fp8) scales.
  ContiguousKvCache(const KvLayout& layout, int num_seqs, std::span<const float> static_scales = {});

  KvView view() const;
  const KvLayout& layout() const { return layout_; }
  int max_tokens() const { return layout_.page_size; }

 private:
  KvLayout layout_;
  std::unique_ptr<uint8_t[]> data_;
  std::vector<float> static_scales_;    // [layer][k|v][kv_head]; empty unless kStatic
  std::vector<int32_t> block_table_;    // [num_seqs] = {0, 1, ...}
  std::vector<int32_t> block_offsets_;  // [num_seqs + 1]
};

}  // namespace densa
