#pragma once
// KvView: a non-owning view of a paged KV cache for one forward batch (the CPU cousin of
// FlashInfer's paged_kv_t). A contiguous cache is the special case of one page per sequence.
//
// Page byte layout (every page holds `page_size` token slots for every layer):
//   data:   [layer][k=0|v=1][kv_head][slot][head_dim] elements of `dtype`
//   scales: (dynamic scale mode only) [layer][k|v][kv_head][slot] float32, after the data
#include <cstdint>
#include <span>

#include "core/dtype.h"

namespace densa {

enum class KvScaleMode : uint8_t {
  kNone,     // bf16 / f32 storage: no scales
  kStatic,   // fp8: one scale per (layer, k|v, kv_head), from the checkpoint or calibration
  kDynamic,  // fp8: one scale per (layer, k|v, kv_head, token), stored beside the page
};

struct KvLayout {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int page_size = 16;  // tokens per page
  DType dtype = DType::kBF16;  // kF32, kBF16 or kFP8E4M3
  KvScaleMode scale_mode = KvScaleMode::kNone;

  int64_t elem_bytes() const { return dtype == DType::kF32 ? 4 : dtype == DType::kBF16 ? 2 : 1; }
  // Bytes of K (or V) for one token of one layer.
  int64_t token_bytes_per_layer() const { return num_kv_heads * head_dim * elem_bytes(); }
  int64_t data_bytes_per_page() const {
    return static_cast<int64_t>(num_layers) * 2 * num_kv_heads * page_size * head_dim * elem_bytes();
  }
  int64_t scale_bytes_per_page() const {
    return scale_mode == KvScaleMode::kDynamic
               ? static_cast<int64_t>(num_layers) * 2 * num_kv_heads * page_size * 4
               : 0;
  }
  int64_t page_bytes() const { return data_bytes_per_page() + scale_bytes_per_page(); }
  // Offset in bytes of (layer, kv, head, slot) inside a page's data region.
  int64_t data_offset(int layer, int kv, int head, int slot) const {
    return ((((static_cast<int64_t>(layer) * 2 + kv) * num_kv_heads + head) * page_size + slot) *
            head_dim) * elem_bytes();
  }
  int64_t scale_offset(int layer, int kv, int head, int slot) const {
    return data_bytes_per_page() +
           (((static_cast<int64_t>(layer) * 2 + kv) * num_kv_heads + head) * page_size + slot) * 4;
  }
};

struct KvView {
  KvLayout layout;
  uint8_t* pool = nullptr;                  // page p starts at pool + p * layout.page_bytes()
  std::span<const int32_t> block_table;     // page ids of all sequences, concatenated
  std::span<const int32_t> block_offsets;   // [num_seqs + 1] into block_table
  const float* static_scales = nullptr;     // kStatic: [layer][k|v][kv_head]

  int num_seqs() const { return static_cast<int>(block_offsets.size()) - 1; }
  uint8_t* page_ptr(int32_t page) const { return pool + static_cast<int64_t>(page) * layout.page_bytes(); }
  // Page holding token `pos` of sequence `seq`. DCHECK-free hot path; callers keep pos in range.
  int32_t page_of(int seq, int32_t pos) const {
    return block_table[block_offsets[seq] + pos / layout.page_size];
  }
};

}  // namespace densa
