#pragma once
// KvView: a non-owning view of a paged KV cache for one forward batch (the CPU cousin of
// FlashInfer's paged_kv_t). A contiguous cache is the special case of one page per sequence.
//
// A page stores `rows_per_layer()` vectors ("rows") of `row_dim()` elements per token per layer:
//   GQA (latent_dim == 0): K and V per kv head, row r = k|v * num_kv_heads + kv_head, head_dim wide
//   MLA (latent_dim > 0):  one latent row per token per layer, [c_kv (kv_lora_rank) | k_pe
//                          (qk_rope_head_dim)] = latent_dim elements; no per-head K or V
// Page byte layout (every page holds `page_size` token slots for every layer):
//   data:   [layer][row][slot][row_dim] elements of `dtype`
//   scales: (dynamic scale mode only) [layer][row][slot] float32, after the data
#include <cstdint>
#include <span>

#include "core/dtype.h"

namespace densa {

enum class KvScaleMode : uint8_t {
  kNone,     // bf16 / f32 storage: no scales
  kStatic,   // fp8: one scale per (layer, k|v, kv_head) (latent: per layer, c_kv and k_pe),
             // from the checkpoint or calibration
  kDynamic,  // fp8: one scale per (layer, k|v, kv_head, token), stored beside the page
};

struct KvLayout {
  int num_layers = 0;
  int num_kv_heads = 0;  // GQA; 0 for MLA
  int head_dim = 0;      // GQA; 0 for MLA
  int page_size = 16;  // tokens per page
  DType dtype = DType::kBF16;  // kF32, kBF16 or kFP8E4M3
  KvScaleMode scale_mode = KvScaleMode::kNone;  // MLA kDynamic: one scale per latent row
  int latent_dim = 0;    // MLA: kv_lora_rank + qk_rope_head_dim; 0 for GQA
  // DSA (MLA+DSA, GLM-5): a second row type, the lightning indexer's key per token per layer,
  // always FP8 e4m3 with one f32 scale, after the data and dynamic scales of the page (so page
  // bytes, digests, transfers and capacity cover it). 0 = none.
  int index_dim = 0;

  bool is_latent() const { return latent_dim > 0; }
  int rows_per_layer() const { return is_latent() ? 1 : 2 * num_kv_heads; }
  int row_dim() const { return is_latent() ? latent_dim : head_dim; }
  int64_t elem_bytes() const { return dtype == DType::kF32 ? 4 : dtype == DType::kBF16 ? 2 : 1; }
  int64_t row_bytes() const { return row_dim() * elem_bytes(); }
  // Data bytes of one token in one layer (K and V of every kv head, or the latent row).
  int64_t token_bytes_per_layer() const { return rows_per_layer() * row_bytes(); }
  int64_t data_bytes_per_page() const {
    return static_cast<int64_t>(num_layers) * page_size * token_bytes_per_layer();
  }
  int64_t scale_bytes_per_page() const {
    return scale_mode == KvScaleMode::kDynamic
               ? static_cast<int64_t>(num_layers) * rows_per_layer() * page_size * 4
               : 0;
  }
  int64_t index_bytes_per_page() const {
    return static_cast<int64_t>(num_layers) * page_size * (index_dim > 0 ? index_dim + 4 : 0);
  }
  int64_t page_bytes() const { return data_bytes_per_page() + scale_bytes_per_page() + index_bytes_per_page(); }
  // DSA: offset of (layer, slot)'s FP8 index key and of its f32 scale inside a page.
  int64_t index_key_offset(int layer, int slot) const {
    return data_bytes_per_page() + scale_bytes_per_page() +
           (static_cast<int64_t>(layer) * page_size + slot) * index_dim;
  }
  int64_t index_scale_offset(int layer, int slot) const {
    return data_bytes_per_page() + scale_bytes_per_page() + static_cast<int64_t>(num_layers) * page_size * index_dim +
           (static_cast<int64_t>(layer) * page_size + slot) * 4;
  }
  // Offset in bytes of (layer, row, slot) inside a page's data region / its dynamic scale.
  int64_t row_offset(int layer, int row, int slot) const {
    return ((static_cast<int64_t>(layer) * rows_per_layer() + row) * page_size + slot) * row_bytes();
  }
  int64_t row_scale_offset(int layer, int row, int slot) const {
    return data_bytes_per_page() +
           ((static_cast<int64_t>(layer) * rows_per_layer() + row) * page_size + slot) * 4;
  }
  // GQA: (layer, k=0|v=1, kv head, slot).
  int64_t data_offset(int layer, int kv, int head, int slot) const {
    return row_offset(layer, kv * num_kv_heads + head, slot);
  }
  int64_t scale_offset(int layer, int kv, int head, int slot) const {
    return row_scale_offset(layer, kv * num_kv_heads + head, slot);
  }
};

struct KvView {
  KvLayout layout;
  uint8_t* pool = nullptr;                  // page p starts at pool + p * layout.page_bytes()
  std::span<const int32_t> block_table;     // page ids of all sequences, concatenated
  std::span<const int32_t> block_offsets;   // [num_seqs + 1] into block_table
  const float* static_scales = nullptr;     // kStatic: [layer][k|v][kv_head]; latent: [layer][c_kv|k_pe]

  int num_seqs() const { return static_cast<int>(block_offsets.size()) - 1; }
  uint8_t* page_ptr(int32_t page) const { return pool + static_cast<int64_t>(page) * layout.page_bytes(); }
  // Page holding token `pos` of sequence `seq`. DCHECK-free hot path; callers keep pos in range.
  int32_t page_of(int seq, int32_t pos) const {
    return block_table[block_offsets[seq] + pos / layout.page_size];
  }
};

}  // namespace densa
