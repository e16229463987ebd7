#pragma once
// ModelWeights: every tensor of a loaded model as views, plus the storage that owns them
// (memory-mapped files, and buffers for tensors that had to be converted at load, such as
// GGUF's permuted Q/K rows or F16 norms). GGUF and Hugging Face loads produce the same
// ModelWeights: HF [out, in] matrices, rotate-half (NeoX) RoPE layout for Q and K.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/huge_page_arena.h"
#include "core/tensor_view.h"
#include "io/mapped_file.h"
#include "io/model_config.h"
#include "text/tokenizer.h"
#include "text/tokenizer_loader.h"

namespace densa {

struct LayerWeights {
  std::vector<float> attn_norm;  // [hidden]
  WeightView wq;                 // [num_heads*head_dim, hidden]
  WeightView wk;                 // [num_kv_heads*head_dim, hidden]
  WeightView wv;                 // [num_kv_heads*head_dim, hidden]
  WeightView wo;                 // [hidden, num_heads*head_dim]
  // Attention extras; empty unless the config asks for them.
  std::vector<float> bq, bk, bv;         // attention_bias: [q_dim], [kv_dim], [kv_dim]
  std::vector<float> q_norm, k_norm;     // qk_norm: [head_dim], applied per head before RoPE
  // MLA (config.is_mla(), model/arch_deepseek_v3.h): wq is q_proj when q_lora_rank is 0, wo is
  // o_proj [hidden, num_heads*v_head_dim]; wk / wv stay empty.
  WeightView q_a;                // [q_lora_rank, hidden]
  std::vector<float> q_a_norm;   // [q_lora_rank]
  WeightView q_b;                // [num_heads*(qk_nope+qk_rope), q_lora_rank]
  WeightView kv_a;               // kv_a_proj_with_mqa [kv_lora_rank + qk_rope, hidden]
  std::vector<float> kv_a_norm;  // [kv_lora_rank]
  WeightView kv_b;               // [num_heads*(qk_nope + v_head_dim), kv_lora_rank]
  // kv_b split for the absorbed products and kept in fp32 (prepare_mla_weights, at load), so
  // no step dequantizes kv_b: mla_uk [num_heads*qk_nope, kv_lora_rank] holds W_UK_h of each
  // head h, mla_uv_t [num_heads*kv_lora_rank, v_head_dim] holds W_UV_h^T.
  WeightView mla_uk;
  WeightView mla_uv_t;
  // DSA lightning indexer (config.is_dsa()): index_n_heads heads of index_head_dim.
  WeightView idx_wq_b;               // [index_n_heads*index_head_dim, q_lora_rank], on q_a's normed output
  WeightView idx_wk;                 // [index_head_dim, hidden]
  std::vector<float> idx_k_norm_w;   // LayerNorm (eps 1e-6) of the key: weight, bias [index_head_dim]
  std::vector<float> idx_k_norm_b;
  WeightView idx_weights_proj;       // [index_n_heads, hidden]: per-head weight of each query
  std::vector<float> ffn_norm;   // [hidden]
  // Dense FFN (layers where !config.is_moe_layer(i)).
  WeightView w_gate;             // [intermediate, hidden]
  WeightView w_up;               // [intermediate, hidden]
  WeightView w_down;             // [hidden, intermediate]
  // MoE FFN: router plus one SwiGLU per expert.
  WeightView router;                    // [num_experts, hidden]
  std::vector<WeightView> expert_gate;  // [num_experts] x [intermediate, hidden]
  std::vector<WeightView> expert_up;    // [num_experts] x [intermediate, hidden]
  std::vector<WeightView> expert_down;  // [num_experts] x [hidden, intermediate]
  std::vector<float> router_bias;       // kSigmoidGrouped: [num_experts], selection only
  // Shared expert (shared_expert_intermediate_size > 0): a SwiGLU every token passes through.
  WeightView shared_gate;               // [shared_intermediate, hidden]
  WeightView shared_up;                 // [shared_intermediate, hidden]
  WeightView shared_down;               // [hidden, shared_intermediate]
  std::vector<float> shared_expert_gate;  // [hidden]; empty = ungated (GLM)
};

// Checkpoint tensors recognised and deliberately not loaded (model/hf_tensor_inventory.h).
struct SkippedTensors {
  int64_t vision_tensors = 0;  // vision tower + multimodal projector (text-only serving)
  int64_t vision_bytes = 0;
  int64_t nextn_tensors = 0;   // multi-token-prediction layers (num_nextn_predict_layers)
  int64_t nextn_bytes = 0;
};

struct ModelWeights {
  ModelConfig config;
  std::string source;            // path it was loaded from
  std::string format;            // "gguf" or "hf"
  WeightView tok_embeddings;     // [vocab, hidden]
  std::vector<float> final_norm; // [hidden]
  WeightView lm_head;            // [vocab, hidden]
  std::vector<LayerWeights> layers;  // [num_layers]
  std::unique_ptr<Tokenizer> tokenizer;  // null if the model ships none
  std::string chat_template;     // the default Jinja template (GGUF / chat_template.jinja /
                                 // tokenizer_config.json); empty if none
  TextAssets text_assets;        // every template, bos / eos token text, all eos ids
  SkippedTensors skipped;        // what the checkpoint holds that the loader left unread
  // The slice of a tensor- / expert-parallel layout these weights are (model/shard.h); config
  // then describes the slice (heads and FFN widths divided by tp).
  ParallelLayout parallel;

  // Storage behind the views above.
  std::vector<std::unique_ptr<MappedFile>> files;
  // Buffers for tensors converted or copied at load (quantized, repacked, unpermuted, moved
  // out of the mapped file), in huge pages where the system allows (core/huge_page_arena.h).
  HugePageArena arena;

  // Allocates an owned, zeroed, 64-byte aligned buffer of `bytes` in the arena and returns it
  // (views may point into it).
  uint8_t* alloc_owned(size_t bytes) { return arena.alloc(bytes); }
  // Copies adopted into the arena lay INT4 g32 matrices out in this layout where they can
  // (kInt4Tiles8 or kInt4Tiles16; a matrix of rows % 16 != 0 falls back to 8-row tiles).
  // load_model sets it (LoadOptions::int4_layout); kRows: every copy keeps the layout it had.
  WeightLayout int4_layout = WeightLayout::kRows;
  // The same for the W8A8 formats in 16-row tiles: INT8 (GGUF Q8_0 repacked;
  // WeightLayout::kInt8Tiles16; matmul_prefers_int8_tiles) and affine rows (GGUF K-quants, IQ4,
  // MXFP4; WeightLayout::kAffineTiles16, tiled in place in the arena; matmul_prefers_affine_tiles).
  // Those layouts' kernels sum each group exactly, so their results differ in rounding from the
  // row-major kernels'.
  bool int8_tiles = false;
  bool affine_tiles = false;
  // A copy of v's codes and scales in the arena: the same values and format, in int4_layout (INT4
  // g32) or 16-row (INT8, affine rows) tiles when int4_layout / int8_tiles / affine_tiles is set and v can be
  // tiled (int4_group_tileable(16) / int8_group_tileable / affine_tileable), else in v's layout. An
  // affine-row matrix already in the arena is tiled in place and keeps its address.
  WeightView adopt(const WeightView& v);
  // The WeightView::amx of every BF16 / F16 matrix (set_half_float_amx): kOff keeps them on fp32
  // activations and exact products (LoadOptions::bf16_f32_activations).
  AmxUse half_float_amx = AmxUse::kAuto;
  int64_t num_params() const;
  int64_t weight_bytes() const;  // bytes of all matrices + norms as stored
};

// Gives every BF16 / F16 matrix of w (each layer's, lm_head, the embeddings) WeightView::amx =
// use and records it in w.half_float_amx; other dtypes keep theirs. Views copied from w
// afterwards carry it.
void set_half_float_amx(ModelWeights& w, AmxUse use);

}  // namespace densa
