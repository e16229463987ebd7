#include "model/shard.h"

#include <cstring>
#include <string>

namespace densa {
namespace {

// The scales of v laid out as a grid: [ceil(rows / scale_rows)][ceil(cols / scale_cols)].
int64_t scale_grid_cols(const WeightView& v) { return (v.cols + v.scale_cols - 1) / v.scale_cols; }

size_t scale_elem_bytes(const WeightView& v) { return v.scales_f32 != nullptr ? 4 : 2; }

const uint8_t* scale_base(const WeightView& v) {
  if (v.scales_f32 != nullptr) return reinterpret_cast<const uint8_t*>(v.scales_f32);
  if (v.scales_bf16 != nullptr) return reinterpret_cast<const uint8_t*>(v.scales_bf16);
  return reinterpret_cast<const uint8_t*>(v.scales_f16);
}

void set_scale_base(WeightView& v, const uint8_t* p) {
  if (v.scales_f32 != nullptr) v.scales_f32 = reinterpret_cast<const float*>(p);
  if (v.scales_bf16 != nullptr) v.scales_bf16 = reinterpret_cast<const uint16_t*>(p);
  if (v.scales_f16 != nullptr) v.scales_f16 = reinterpret_cast<const uint16_t*>(p);
}

Status check_rows_layout(const WeightView& v, const std::string& name) {
  if (v.layout != WeightLayout::kRows) return internal_error(name + ": sharding needs row-major weights");
  return Status::ok();
}

// Rows [r0, r0 + nr) of v: a view into the same storage.
Result<WeightView> slice_rows(const WeightView& v, int64_t r0, int64_t nr, const std::string& name) {
  DENSA_RETURN_IF_ERROR(check_rows_layout(v, name));
  if (r0 < 0 || nr <= 0 || r0 + nr > v.rows) return internal_error(name + ": row slice out of range");
  WeightView s = v;
  s.rows = nr;
  s.data = v.row_ptr(r0);
  if (v.has_scales()) {
    if (r0 % v.scale_rows != 0 || (nr % v.scale_rows != 0 && r0 + nr != v.rows)) {
      return invalid_argument(name + ": a slice of " + std::to_string(nr) + " rows at row " + std::to_string(r0) +
                              " cuts its " + std::to_string(v.scale_rows) + "-row scale blocks");
    }
    set_scale_base(s, scale_base(v) + static_cast<size_t>(r0 / v.scale_rows * scale_grid_cols(v)) * scale_elem_bytes(v));
  }
  return s;
}

// Columns [c0, c0 + nc) of v: a copy in w's arena (the rows' bytes are not contiguous).
Result<WeightView> slice_cols(ModelWeights& w, const WeightView& v, int64_t c0, int64_t nc, const std::string& name) {
  DENSA_RETURN_IF_ERROR(check_rows_layout(v, name));
  if (c0 < 0 || nc <= 0 || c0 + nc > v.cols) return internal_error(name + ": column slice out of range");
  const int64_t block = dtype_block_elems(v.dtype);
  if (c0 % block != 0 || nc % block != 0) {
    return invalid_argument(name + ": a slice of " + std::to_string(nc) + " columns at column " + std::to_string(c0) +
                            " cuts its " + std::string(dtype_name(v.dtype)) + " blocks of " + std::to_string(block));
  }
  if (v.has_scales() && (c0 % v.scale_cols != 0 || (nc % v.scale_cols != 0 && c0 + nc != v.cols))) {
    return invalid_argument(name + ": a slice of " + std::to_string(nc) + " columns at column " + std::to_string(c0) +
                            " cuts its scale groups of " + std::to_string(v.scale_cols) + " columns");
  }
  WeightView s = v;
  s.cols = nc;
  const int64_t in_row = v.row_bytes(), out_row = s.row_bytes(), skip = dtype_row_bytes(v.dtype, c0);
  uint8_t* data = w.alloc_owned(static_cast<size_t>(v.rows * out_row));
  for (int64_t r = 0; r < v.rows; ++r) {
    std::memcpy(data + r * out_row, static_cast<const uint8_t*>(v.data) + r * in_row + skip, static_cast<size_t>(out_row));
  }
  s.data = data;
  if (v.has_scales()) {
    const int64_t grid_rows = (v.rows + v.scale_rows - 1) / v.scale_rows;
    const int64_t in_cols = scale_grid_cols(v), out_cols = (nc + v.scale_cols - 1) / v.scale_cols;
    const int64_t first = c0 / v.scale_cols;
    const size_t eb = scale_elem_bytes(v);
    uint8_t* scales = w.alloc_owned(static_cast<size_t>(grid_rows * out_cols) * eb);
    for (int64_t r = 0; r < grid_rows; ++r) {
      std::memcpy(scales + static_cast<size_t>(r * out_cols) * eb, scale_base(v) + static_cast<size_t>(r * in_cols + first) * eb,
                  static_cast<size_t>(out_cols) * eb);
    }
    set_scale_base(s, scales);
  }
  return s;
}

std::vector<float> slice_vector(const std::vector<float>& v, int64_t r0, int64_t n) {
  if (v.empty()) return v;
  return std::vector<float>(v.begin() + r0, v.begin() + r0 + n);
}

Status divisible(int64_t value, int by, const char* what, const char* flag) {
  if (value % by != 0) {
    return invalid_argument(std::string(what) + " (" + std::to_string(value) + ") is not divisible by " + flag + " " +
                            std::to_string(by));
  }
  return Status::ok();
}

std::string tensor_name(int layer, const std::string& what) { return "layer " + std::to_string(layer) + " " + what; }

// gate / up keep rows [rank I/tp, (rank+1) I/tp), down the same columns.
Status shard_swiglu(ModelWeights& w, WeightView& gate, WeightView& up, WeightView& down, int tp, int rank,
                    const std::string& name) {
  if (tp == 1 || gate.empty()) return Status::ok();
  const int64_t I = gate.rows;
  DENSA_RETURN_IF_ERROR(divisible(I, tp, (name + " width").c_str(), "--tp"));
  const int64_t part = I / tp, r0 = rank * part;
  DENSA_ASSIGN_OR_RETURN(gate, slice_rows(gate, r0, part, name + " gate"));
  DENSA_ASSIGN_OR_RETURN(up, slice_rows(up, r0, part, name + " up"));
  DENSA_ASSIGN_OR_RETURN(down, slice_cols(w, down, r0, part, name + " down"));
  return Status::ok();
}

}  // namespace

Status shard_weights(ModelWeights& w, const ParallelLayout& p) {
  if (p.tp < 1 || p.ep < 1 || p.tp_rank < 0 || p.tp_rank >= p.tp || p.ep_rank < 0 || p.ep_rank >= p.ep) {
    return invalid_argument("bad parallel layout");
  }
  if (!p.active()) return Status::ok();
  ModelConfig& c = w.config;
  if (p.ep > 1) {
    if (!c.is_moe()) return invalid_argument("--ep " + std::to_string(p.ep) + " needs a mixture-of-experts model");
    DENSA_RETURN_IF_ERROR(divisible(c.num_experts, p.ep, "the number of routed experts", "--ep"));
  }
  if (p.tp > 1) {
    DENSA_RETURN_IF_ERROR(divisible(c.num_heads, p.tp, "the number of attention heads", "--tp"));
    if (!c.is_mla()) DENSA_RETURN_IF_ERROR(divisible(c.num_kv_heads, p.tp, "the number of KV heads", "--tp"));
  }
  const int64_t hd = c.head_dim;
  const int64_t q_part = static_cast<int64_t>(c.num_heads / p.tp) * hd;
  const int64_t kv_part = static_cast<int64_t>(c.num_kv_heads / p.tp) * hd;
  const int64_t e_part = c.is_moe() ? c.num_experts / p.ep : 0;
  const int64_t e_first = p.ep_rank * e_part;
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    if (p.tp > 1 && c.is_mla()) {
      // MLA: the query heads and their slices of kv_b and o_proj split; the latent
      // projections (q_a, kv_a), their norms and the DSA indexer replicated, and with them
      // the latent KV cache, which every rank stores whole.
      const MlaConfig& m = c.mla;
      const int64_t heads = c.num_heads / p.tp, h0 = p.tp_rank * heads;
      const int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim, kvb = m.qk_nope_head_dim + m.v_head_dim;
      if (!lw.q_b.empty()) {
        DENSA_ASSIGN_OR_RETURN(lw.q_b, slice_rows(lw.q_b, h0 * qk, heads * qk, tensor_name(l, "q_b_proj")));
      } else {
        DENSA_ASSIGN_OR_RETURN(lw.wq, slice_rows(lw.wq, h0 * qk, heads * qk, tensor_name(l, "q_proj")));
      }
      DENSA_ASSIGN_OR_RETURN(lw.kv_b, slice_rows(lw.kv_b, h0 * kvb, heads * kvb, tensor_name(l, "kv_b_proj")));
      DENSA_ASSIGN_OR_RETURN(lw.wo, slice_cols(w, lw.wo, h0 * m.v_head_dim, heads * m.v_head_dim, tensor_name(l, "o_proj")));
      DENSA_RETURN_IF_ERROR(shard_swiglu(w, lw.w_gate, lw.w_up, lw.w_down, p.tp, p.tp_rank, tensor_name(l, "mlp")));
    } else if (p.tp > 1) {
      const int64_t q0 = p.tp_rank * q_part, k0 = p.tp_rank * kv_part;
      DENSA_ASSIGN_OR_RETURN(lw.wq, slice_rows(lw.wq, q0, q_part, tensor_name(l, "q_proj")));
      DENSA_ASSIGN_OR_RETURN(lw.wk, slice_rows(lw.wk, k0, kv_part, tensor_name(l, "k_proj")));
      DENSA_ASSIGN_OR_RETURN(lw.wv, slice_rows(lw.wv, k0, kv_part, tensor_name(l, "v_proj")));
      DENSA_ASSIGN_OR_RETURN(lw.wo, slice_cols(w, lw.wo, q0, q_part, tensor_name(l, "o_proj")));
      lw.bq = slice_vector(lw.bq, q0, q_part);
      lw.bk = slice_vector(lw.bk, k0, kv_part);
      lw.bv = slice_vector(lw.bv, k0, kv_part);
      DENSA_RETURN_IF_ERROR(shard_swiglu(w, lw.w_gate, lw.w_up, lw.w_down, p.tp, p.tp_rank, tensor_name(l, "mlp")));
    }
    for (size_t e = 0; e < lw.expert_gate.size(); ++e) {
      const int64_t ei = static_cast<int64_t>(e);
      if (ei < e_first || ei >= e_first + e_part) {
        lw.expert_gate[e] = lw.expert_up[e] = lw.expert_down[e] = WeightView{};
        continue;
      }
      DENSA_RETURN_IF_ERROR(shard_swiglu(w, lw.expert_gate[e], lw.expert_up[e], lw.expert_down[e], p.tp, p.tp_rank,
                                         tensor_name(l, "expert " + std::to_string(e))));
    }
    if (!lw.shared_gate.empty()) {
      if (p.ep_rank != 0) {
        lw.shared_gate = lw.shared_up = lw.shared_down = WeightView{};
      } else {
        DENSA_RETURN_IF_ERROR(
            shard_swiglu(w, lw.shared_gate, lw.shared_up, lw.shared_down, p.tp, p.tp_rank, tensor_name(l, "shared expert")));
      }
    }
  }
  // The output projection and the embeddings: vocabulary rows split over the tp group when
  // they divide evenly (forward's final_logits sums the logit slices, embed_tokens the rows);
  // otherwise replicated. A tied head stays the embedding's slice.
  const bool tied = !w.lm_head.empty() && w.lm_head.data == w.tok_embeddings.data;
  if (p.tp > 1 && !w.tok_embeddings.empty() && w.tok_embeddings.rows % p.tp == 0) {
    const int64_t part = w.tok_embeddings.rows / p.tp;
    DENSA_ASSIGN_OR_RETURN(w.tok_embeddings, slice_rows(w.tok_embeddings, p.tp_rank * part, part, "embeddings"));
  }
  if (tied) {
    w.lm_head = w.tok_embeddings;
  } else if (p.tp > 1 && !w.lm_head.empty() && w.lm_head.rows % p.tp == 0) {
    const int64_t part = w.lm_head.rows / p.tp;
    DENSA_ASSIGN_OR_RETURN(w.lm_head, slice_rows(w.lm_head, p.tp_rank * part, part, "lm_head"));
  }
  c.num_heads /= p.tp;
  c.num_kv_heads = c.is_mla() ? c.num_heads : c.num_kv_heads / p.tp;
  c.intermediate_size /= p.tp;
  c.moe_intermediate_size /= p.tp;
  c.shared_expert_intermediate_size /= p.tp;
  w.parallel = p;
  return Status::ok();
}

}  // namespace densa
