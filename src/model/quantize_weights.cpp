#include "model/quantize_weights.h"

#include <vector>

#include "model/hf_moe_names.h"
#include "quant/dequantize.h"
#include "quant/affine_tiles.h"
#include "quant/int4_group.h"
#include "quant/int8_group.h"

namespace densa {

void for_each_quantizable_matrix(ModelWeights& w, const std::function<void(const std::string&, WeightView&)>& fn) {
  const HfMoeNames moe = hf_moe_names(w.config);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    if (!l.kv_a.empty()) {  // MLA (deepseek_v3)
      if (l.q_a.empty()) {
        fn(p + "self_attn.q_proj", l.wq);
      } else {
        fn(p + "self_attn.q_a_proj", l.q_a);
        fn(p + "self_attn.q_b_proj", l.q_b);
      }
      fn(p + "self_attn.kv_a_proj_with_mqa", l.kv_a);
      fn(p + "self_attn.kv_b_proj", l.kv_b);
      fn(p + "self_attn.o_proj", l.wo);
    } else {
      fn(p + "self_attn.q_proj", l.wq);
      fn(p + "self_attn.k_proj", l.wk);
      fn(p + "self_attn.v_proj", l.wv);
      fn(p + "self_attn.o_proj", l.wo);
    }
    if (!l.w_gate.empty()) {
      fn(p + "mlp.gate_proj", l.w_gate);
      fn(p + "mlp.up_proj", l.w_up);
      fn(p + "mlp.down_proj", l.w_down);
    }
    for (size_t e = 0; e < l.expert_gate.size(); ++e) {
      if (l.expert_gate[e].empty()) continue;  // held by another expert-parallel rank
      const std::string ep = p + moe.expert_prefix + std::to_string(e) + ".";
      fn(ep + moe.expert_gate, l.expert_gate[e]);
      fn(ep + moe.expert_down, l.expert_down[e]);
      fn(ep + moe.expert_up, l.expert_up[e]);
    }
    if (!l.shared_gate.empty()) {
      fn(p + moe.shared_prefix + "gate_proj", l.shared_gate);
      fn(p + moe.shared_prefix + "up_proj", l.shared_up);
      fn(p + moe.shared_prefix + "down_proj", l.shared_down);
    }
  }
}

Status quantize_weights(ModelWeights& w, const WeightQuantSpec& spec, const std::function<void(int, int)>& on_matrix) {
  Status status = Status::ok();
  int total = 0;
  for_each_quantizable_matrix(w, [&](const std::string& name, WeightView& v) {
    ++total;
    if (!status.is_ok()) return;
    Status s = check_quant_target(spec, v.rows, v.cols);
    if (!s.is_ok()) status = invalid_argument(w.source + ": tensor '" + name + "': " + s.message());
  });
  DENSA_RETURN_IF_ERROR(status);
  int done = 0;
  for_each_quantizable_matrix(w, [&](const std::string&, WeightView& v) {
    if (weight_view_in_format(v, spec)) {  // already in the target format (a pre-quantized checkpoint): keep it exact
      if (on_matrix) on_matrix(++done, total);
      return;
    }
    const std::vector<float> f = dequantize_matrix(v);
    v = w.adopt(quantize_matrix(f.data(), v.rows, v.cols, spec).view);  // the temporary buffers go
    if (on_matrix) on_matrix(++done, total);
  });
  return Status::ok();
}

Status quantize_lm_head(ModelWeights& w, const WeightQuantSpec& spec) {
  WeightView& head = w.lm_head;
  if (Status s = check_quant_target(spec, head.rows, head.cols); !s.is_ok()) {
    return invalid_argument(w.source + ": lm_head [" + std::to_string(head.rows) + ", " + std::to_string(head.cols) +
                            "] cannot be stored as " + weight_quant_spec_name(spec) + ": " + s.message());
  }
  if (weight_view_in_format(head, spec)) return Status::ok();
  // Reads the stored values, so a tied head starts from the embeddings and leaves them alone.
  const std::vector<float> f = dequantize_matrix(head);
  head = w.adopt(quantize_matrix(f.data(), head.rows, head.cols, spec).view);
  return Status::ok();
}

namespace {

// Repacked into temporary buffers, then adopted: into the arena row-major, or in 8-row tiles
// when w.int4_layout says (so no row-major copy is left behind in the arena).
WeightView repack_q4_0(ModelWeights& w, const WeightView& v) {
  std::vector<uint8_t> packed(static_cast<size_t>(v.rows * v.cols / 2));
  std::vector<uint16_t> scales(static_cast<size_t>(v.rows * (v.cols / 32)));
  int4_group_from_q4_0(static_cast<const uint8_t*>(v.data), v.rows, v.cols, packed, scales);
  return w.adopt(int4_group_view_f16(packed.data(), scales.data(), v.rows, v.cols));
}

WeightView repack_q8_0(ModelWeights& w, const WeightView& v) {
  const int64_t groups = v.rows * (v.cols / 32);
  const auto repack = [&](uint8_t* codes, uint16_t* scales) {
    int8_group_from_q8_0(static_cast<const uint8_t*>(v.data), v.rows, v.cols,
                         std::span<uint8_t>(codes, static_cast<size_t>(v.rows * v.cols)),
                         std::span<uint16_t>(scales, static_cast<size_t>(groups)));
    return int8_group_view_f16(codes, scales, v.rows, v.cols);
  };
  if (w.int8_tiles) {  // through temporary buffers: adopt lays them out in 16-row tiles where
                       // they can be (else copies them), so no second row-major copy is kept
    std::vector<uint8_t> codes(static_cast<size_t>(v.rows * v.cols));
    std::vector<uint16_t> scales(static_cast<size_t>(groups));
    return w.adopt(repack(codes.data(), scales.data()));
  }
  return repack(w.alloc_owned(static_cast<size_t>(v.rows * v.cols)),
                reinterpret_cast<uint16_t*>(w.alloc_owned(static_cast<size_t>(groups) * 2)));
}

// The repacked form of a GGUF block matrix, or v itself for any other dtype.
WeightView repack_ggml(ModelWeights& w, const WeightView& v) {
  if (v.dtype == DType::kQ4_0) return repack_q4_0(w, v);
  if (v.dtype == DType::kQ8_0) return repack_q8_0(w, v);
  return v;
}

}  // namespace

int repack_ggml_for_kernels(ModelWeights& w) {
  int n = 0;
  for_each_quantizable_matrix(w, [&](const std::string&, WeightView& v) {
    const WeightView r = repack_ggml(w, v);
    n += r.data != v.data;
    v = r;
  });
  const WeightView head = repack_ggml(w, w.lm_head);
  if (head.data != w.lm_head.data) {
    if (w.lm_head.data == w.tok_embeddings.data) w.tok_embeddings = head;  // tied: the lookup reads the same values
    w.lm_head = head;
    ++n;
  }
  return n;
}

int move_matrices_to_arena(ModelWeights& w) {
  int n = 0;
  // Done: in the arena, and not a row-major INT4 g32 copy that the kernels want in tiles.
  const auto settled = [&](const WeightView& v) {
    return w.arena.contains(v.data) && !(w.int4_layout != WeightLayout::kRows && int4_group_tileable(v)) &&
           !(w.int8_tiles && int8_group_tileable(v)) && !(w.affine_tiles && affine_tileable(v));
  };
  for_each_quantizable_matrix(w, [&](const std::string&, WeightView& v) {
    if (v.empty() || settled(v)) return;
    v = w.adopt(v);
    ++n;
  });
  if (!w.lm_head.empty() && !settled(w.lm_head)) {
    const bool tied = w.lm_head.data == w.tok_embeddings.data;
    w.lm_head = w.adopt(w.lm_head);
    if (tied) w.tok_embeddings = w.lm_head;
    ++n;
  }
  return n;
}

}  // namespace densa
