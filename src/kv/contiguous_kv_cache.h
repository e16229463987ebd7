#pragma once
// ContiguousKvCache: the simplest KV store — one page per sequence covering the whole
// context, owned here. Used by single-sequence tools (generate, perplexity) and as the
// contiguous oracle for paged-attention tests. The engine uses PagePool instead.
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kv_view.h"

namespace densa {

class ContiguousKvCache {
 public:
  // Room for num_seqs sequences of up to max_tokens each.
  ContiguousKvCache(int num_layers, int num_kv_heads, int head_dim, int max_tokens, int num_seqs,
                    DType dtype);

  KvView view() const;
  const KvLayout& layout() const { return layout_; }
  int max_tokens() const { return layout_.page_size; }

 private:
  KvLayout layout_;
  std::unique_ptr<uint8_t[]> data_;
  std::vector<int32_t> block_table_;    // [num_seqs] = {0, 1, ...}
  std::vector<int32_t> block_offsets_;  // [num_seqs + 1]
};

}  // namespace densa
