#include "model/model_weights.h"

#include <cstring>
#include <type_traits>

#include "quant/affine_tiles.h"
#include "quant/int4_group.h"
#include "quant/int8_group.h"

namespace densa {
namespace {

int64_t matrix_params(const WeightView& v) { return v.empty() ? 0 : v.rows * v.cols; }
// Codes plus the scales (FP8 block-scaled: fp32, INT4 group-wise: bf16) as held in memory.
int64_t matrix_bytes(const WeightView& v) { return v.empty() ? 0 : v.bytes() + v.scale_bytes(); }

// Calls fn(view, copy) on every WeightView of w (W: ModelWeights or const ModelWeights). `copy`
// marks a view that is not a matrix of its own: lm_head when tied to the embeddings, and MLA's
// absorbed mla_uk / mla_uv_t, which are kv_b rearranged. The one list of a model's matrices.
template <typename W, typename Fn>
void for_each_view(W& w, Fn fn) {
  fn(w.tok_embeddings, false);
  fn(w.lm_head, w.lm_head.data == w.tok_embeddings.data);
  for (auto& l : w.layers) {
    for (auto* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.shared_gate,
                    &l.shared_up, &l.shared_down, &l.q_a, &l.q_b, &l.kv_a, &l.kv_b, &l.idx_wq_b, &l.idx_wk,
                    &l.idx_weights_proj}) {
      fn(*v, false);
    }
    for (auto* v : {&l.mla_uk, &l.mla_uv_t}) fn(*v, true);
    for (auto* experts : {&l.expert_gate, &l.expert_up, &l.expert_down}) {
      for (auto& v : *experts) fn(v, false);
    }
  }
}

// Calls fn on every distinct matrix (a tied lm_head counts once).
template <typename Fn>
void for_each_matrix(const ModelWeights& w, Fn fn) {
  for_each_view(w, [&](const WeightView& v, bool copy) {
    if (!copy) fn(v);
  });
}

int64_t vector_params(const ModelWeights& w) {
  int64_t n = static_cast<int64_t>(w.final_norm.size());
  for (const LayerWeights& l : w.layers) {
    for (const auto* v : {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm, &l.router_bias,
                          &l.shared_expert_gate, &l.q_a_norm, &l.kv_a_norm, &l.idx_k_norm_w, &l.idx_k_norm_b}) {
      n += static_cast<int64_t>(v->size());
    }
  }
  return n;
}

}  // namespace

int64_t ModelWeights::num_params() const {
  int64_t n = vector_params(*this);
  for_each_matrix(*this, [&](const WeightView& v) { n += matrix_params(v); });
  return n;
}

int64_t ModelWeights::weight_bytes() const {
  int64_t n = vector_params(*this) * static_cast<int64_t>(sizeof(float));
  for_each_matrix(*this, [&](const WeightView& v) { n += matrix_bytes(v); });
  return n;
}

void set_half_float_amx(ModelWeights& w, AmxUse use) {
  for_each_view(w, [use](WeightView& v, bool /*copy: every view is set*/) {
    if (v.dtype == DType::kBF16 || v.dtype == DType::kF16) v.amx = use;
  });
  w.half_float_amx = use;
}

WeightView ModelWeights::adopt(const WeightView& v) {
  if (v.empty()) return v;
  if (int4_layout != WeightLayout::kRows && int4_group_tileable(v)) {
    const int64_t n = int4_group_tile8_bytes(v);  // both tile layouts hold the same bytes
    const std::span<uint8_t> dst(alloc_owned(static_cast<size_t>(n)), static_cast<size_t>(n));
    if (int4_layout == WeightLayout::kInt4Tiles16 && int4_group_tileable16(v)) return int4_group_tile16(v, dst);
    return int4_group_tile8(v, dst);
  }
  if (int8_tiles && int8_group_tileable(v)) {
    const int64_t n = int8_group_tile16_bytes(v);
    return int8_group_tile16(v, std::span<uint8_t>(alloc_owned(static_cast<size_t>(n)), static_cast<size_t>(n)));
  }
  if (affine_tiles && affine_tileable(v)) {
    // Affine rows were converted into the arena at load: tile them where they are (a band of 16
    // rows holds exactly its tile's bytes), so no row-major copy is left behind.
    if (arena.contains(v.data)) return affine_tile16_in_place(v, const_cast<uint8_t*>(static_cast<const uint8_t*>(v.data)));
    const int64_t n = v.bytes();
    return affine_tile16(v, std::span<uint8_t>(alloc_owned(static_cast<size_t>(n)), static_cast<size_t>(n)));
  }
  if (v.layout == WeightLayout::kAffineTiles16) {
    uint8_t* data = alloc_owned(static_cast<size_t>(v.bytes()));
    std::memcpy(data, v.data, static_cast<size_t>(v.bytes()));
    return affine_tiled_view(v, data);
  }
  if (v.layout == WeightLayout::kInt4Tiles8 || v.layout == WeightLayout::kInt4Tiles16) {
    const int64_t n = int4_group_tile8_bytes(v);  // codes and scales are one block: copy it whole
    uint8_t* data = alloc_owned(static_cast<size_t>(n));
    std::memcpy(data, v.data, static_cast<size_t>(n));
    return v.layout == WeightLayout::kInt4Tiles8 ? int4_group_tiled_view(v, data) : int4_group_tiled16_view(v, data);
  }
  if (v.layout == WeightLayout::kInt8Tiles16) {
    const int64_t n = int8_group_tile16_bytes(v);
    uint8_t* data = alloc_owned(static_cast<size_t>(n));
    std::memcpy(data, v.data, static_cast<size_t>(n));
    return int8_group_tiled_view(v, data);
  }
  WeightView out = v;
  uint8_t* data = alloc_owned(static_cast<size_t>(v.bytes()));
  std::memcpy(data, v.data, static_cast<size_t>(v.bytes()));
  out.data = data;
  const auto copy_scales = [&](const auto* src) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(src)>>;
    auto* dst = reinterpret_cast<T*>(alloc_owned(static_cast<size_t>(v.scale_bytes())));
    std::memcpy(dst, src, static_cast<size_t>(v.scale_bytes()));
    return static_cast<const T*>(dst);
  };
  if (v.scales_f32 != nullptr) out.scales_f32 = copy_scales(v.scales_f32);
  if (v.scales_bf16 != nullptr) out.scales_bf16 = copy_scales(v.scales_bf16);
  if (v.scales_f16 != nullptr) out.scales_f16 = copy_scales(v.scales_f16);
  return out;
}

}  // namespace densa
