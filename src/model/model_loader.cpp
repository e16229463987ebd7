#include "model/model_loader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/gguf_file.h"
#include "io/safetensors.h"
#include "kernels/matmul.h"
#include "model/arch_deepseek_v3.h"
#include "model/gguf_config.h"
#include "model/shard.h"
#include "model/hf_moe_names.h"
#include "model/hf_quantized.h"
#include "model/hf_tensor_inventory.h"
#include "model/quantize_weights.h"
#include "quant/dequantize.h"
#include "quant/affine_rows.h"
#include "quant/ggml_blocks.h"
#include "text/gguf_bpe.h"
#include "text/tokenizer_loader.h"

namespace densa {
namespace {

// A tensor from either format; shape is outermost first ([out, in] for matrices).
struct RawTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
};

// Tensor lookup in one model source. `gguf` selects GGUF names and ne-order shape messages.
struct TensorSource {
  std::string origin;
  bool gguf = false;
  std::function<Result<RawTensor>(const std::string&)> get;
  std::function<bool(const std::string&)> has;
  // Optional: a matrix stored in a pre-quantized form (FP8 / INT4 checkpoints); returns
  // nullopt when `name` is a plain tensor. Args: name, rows, cols.
  std::function<Result<std::optional<WeightView>>(const std::string&, int64_t, int64_t)> get_quantized;
};

std::string shape_string(std::vector<int64_t> shape, bool gguf) {
  if (gguf) std::reverse(shape.begin(), shape.end());  // GGUF lists ne0 first
  std::string s = gguf ? "ne=[" : "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status check_shape(const TensorSource& src, const RawTensor& t, const std::vector<int64_t>& expected) {
  if (t.shape == expected) return Status::ok();
  return invalid_argument(src.origin + ": tensor '" + t.name + "' has shape " + shape_string(t.shape, src.gguf) +
                          " but the config expects " + shape_string(expected, src.gguf));
}

bool is_matrix_dtype(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kQ8_0: case DType::kQ4_0:
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4: case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: return true;
    case DType::kFP8E4M3: case DType::kI4: case DType::kI8: case DType::kI32: case DType::kU8: return false;
  }
  return false;
}

// A [rows, cols] matrix, or `count` stacked [rows, cols] matrices when count > 0.
Result<std::vector<WeightView>> load_matrices(const TensorSource& src, const std::string& name, int64_t count,
                                              int64_t rows, int64_t cols) {
  if (src.get_quantized && count == 0) {
    DENSA_ASSIGN_OR_RETURN(std::optional<WeightView> q, src.get_quantized(name, rows, cols));
    if (q) return std::vector<WeightView>{*q};
  }
  DENSA_ASSIGN_OR_RETURN(RawTensor t, src.get(name));
  if (!is_matrix_dtype(t.dtype)) {
    return unimplemented(src.origin + ": tensor '" + name + "' has dtype " + std::string(dtype_name(t.dtype)) +
                         ", unsupported for weight matrices (supported: f32, f16, bf16, q8_0, q4_0)");
  }
  std::vector<int64_t> expected = {rows, cols};
  if (count > 0) expected.insert(expected.begin(), count);
  DENSA_RETURN_IF_ERROR(check_shape(src, t, expected));
  std::vector<WeightView> out;
  for (int64_t e = 0; e < std::max<int64_t>(count, 1); ++e) {
    WeightView v;
    v.dtype = t.dtype;
    v.rows = rows;
    v.cols = cols;
    v.data = t.data + e * rows * dtype_row_bytes(t.dtype, cols);
    out.push_back(v);
  }
  return out;
}

Result<WeightView> load_matrix(const TensorSource& src, const std::string& name, int64_t rows, int64_t cols) {
  DENSA_ASSIGN_OR_RETURN(auto views, load_matrices(src, name, 0, rows, cols));
  return views[0];
}

Result<std::vector<float>> load_vector(const TensorSource& src, const std::string& name, int64_t n) {
  DENSA_ASSIGN_OR_RETURN(RawTensor t, src.get(name));
  DENSA_RETURN_IF_ERROR(check_shape(src, t, {n}));
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kF32: std::memcpy(&out[i], t.data + 4 * i, 4); break;
      case DType::kF16: case DType::kBF16: {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        out[i] = t.dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
        break;
      }
      case DType::kQ8_0: case DType::kQ4_0: case DType::kFP8E4M3: case DType::kI4: case DType::kI8:
      case DType::kI32: case DType::kU8: case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4: case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4:
        return unimplemented(src.origin + ": tensor '" + name + "' has dtype " + std::string(dtype_name(t.dtype)) +
                             ", unsupported for norm vectors (supported: f32, f16, bf16)");
    }
  }
  return out;
}

// GGUF stores Q/K rows per head as interleaved pairs: GGUF row 2i+h = HF row h*(head_dim/2)+i.
// Copies the rows back into rotate-half order in an owned buffer (whole rows, so any dtype).
WeightView unpermute_rows(ModelWeights& w, const WeightView& v, int num_heads, int head_dim) {
  uint8_t* dst = w.alloc_owned(static_cast<size_t>(v.bytes()));
  const int64_t rb = v.row_bytes();
  const int half = head_dim / 2;
  for (int head = 0; head < num_heads; ++head) {
    const int64_t base = static_cast<int64_t>(head) * head_dim;
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < half; ++i) {
        std::memcpy(dst + (base + h * half + i) * rb, v.row_ptr(base + 2 * i + h), static_cast<size_t>(rb));
      }
    }
  }
  WeightView out = v;
  out.data = dst;
  return out;
}

std::string layer_name(bool gguf, int i, const char* hf_suffix, const char* gguf_suffix) {
  return gguf ? "blk." + std::to_string(i) + "." + gguf_suffix + ".weight"
              : "model.layers." + std::to_string(i) + "." + hf_suffix + ".weight";
}

// HF name of a layer tensor given in full (biases, correction bias), without adding ".weight".
std::string layer_tensor(int i, const std::string& name) { return "model.layers." + std::to_string(i) + "." + name; }

// Attention extras of the Qwen / GLM families: q/k/v bias, per-head q/k norm.
Status load_attention_extras(const TensorSource& src, int i, ModelWeights& w) {
  const ModelConfig& c = w.config;
  LayerWeights& l = w.layers[static_cast<size_t>(i)];
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  // HF "self_attn.q_proj.bias" / GGUF "blk.i.attn_q.bias"; norms end in ".weight".
  auto name = [&](const char* hf, const char* gguf, const char* suffix) {
    return src.gguf ? "blk." + std::to_string(i) + "." + gguf + suffix : layer_tensor(i, std::string(hf) + suffix);
  };
  if (c.attention_bias) {
    DENSA_ASSIGN_OR_RETURN(l.bq, load_vector(src, name("self_attn.q_proj", "attn_q", ".bias"), q_dim));
    DENSA_ASSIGN_OR_RETURN(l.bk, load_vector(src, name("self_attn.k_proj", "attn_k", ".bias"), kv_dim));
    DENSA_ASSIGN_OR_RETURN(l.bv, load_vector(src, name("self_attn.v_proj", "attn_v", ".bias"), kv_dim));
  }
  if (c.qk_norm) {
    DENSA_ASSIGN_OR_RETURN(l.q_norm, load_vector(src, name("self_attn.q_norm", "attn_q_norm", ".weight"), c.head_dim));
    DENSA_ASSIGN_OR_RETURN(l.k_norm, load_vector(src, name("self_attn.k_norm", "attn_k_norm", ".weight"), c.head_dim));
  }
  return Status::ok();
}

// Router, routed experts, and (Qwen2-MoE / GLM) the shared expert of an HF MoE layer.
Status load_hf_moe(const TensorSource& src, int i, ModelWeights& w) {
  const ModelConfig& c = w.config;
  const HfMoeNames names = hf_moe_names(c);
  const int64_t hidden = c.hidden_size, inter = c.moe_intermediate_size, n = c.num_experts;
  LayerWeights& l = w.layers[static_cast<size_t>(i)];
  auto name = [&](const std::string& part) { return layer_name(false, i, part.c_str(), ""); };
  DENSA_ASSIGN_OR_RETURN(l.router, load_matrix(src, name(names.router), n, hidden));
  for (int e = 0; e < n; ++e) {
    const std::string prefix = names.expert_prefix + std::to_string(e) + ".";
    DENSA_ASSIGN_OR_RETURN(WeightView gate, load_matrix(src, name(prefix + names.expert_gate), inter, hidden));
    DENSA_ASSIGN_OR_RETURN(WeightView up, load_matrix(src, name(prefix + names.expert_up), inter, hidden));
    DENSA_ASSIGN_OR_RETURN(WeightView down, load_matrix(src, name(prefix + names.expert_down), hidden, inter));
    l.expert_gate.push_back(gate);
    l.expert_up.push_back(up);
    l.expert_down.push_back(down);
  }
  if (!names.router_bias.empty()) {
    DENSA_ASSIGN_OR_RETURN(l.router_bias, load_vector(src, layer_tensor(i, names.router_bias), n));
  }
  const int64_t shared = c.shared_expert_intermediate_size;
  if (shared > 0) {
    DENSA_ASSIGN_OR_RETURN(l.shared_gate, load_matrix(src, name(names.shared_prefix + "gate_proj"), shared, hidden));
    DENSA_ASSIGN_OR_RETURN(l.shared_up, load_matrix(src, name(names.shared_prefix + "up_proj"), shared, hidden));
    DENSA_ASSIGN_OR_RETURN(l.shared_down, load_matrix(src, name(names.shared_prefix + "down_proj"), hidden, shared));
  }
  if (c.shared_expert_gate) {
    DENSA_ASSIGN_OR_RETURN(WeightView g, load_matrix(src, name(names.shared_gate), 1, hidden));
    l.shared_expert_gate.resize(static_cast<size_t>(hidden));
    dequantize_row(g, 0, l.shared_expert_gate.data());
  }
  return Status::ok();
}

// The same parts of a GGUF MoE layer (llama.cpp names): ffn_gate_inp, the stacked
// ffn_{gate,up,down}_exps [n_expert, rows, cols], exp_probs_b.bias, ffn_*_shexp, and
// ffn_gate_inp_shexp ([hidden], or [1, hidden]).
Status load_gguf_moe(const TensorSource& src, int i, ModelWeights& w) {
  const ModelConfig& c = w.config;
  const int64_t hidden = c.hidden_size, inter = c.moe_intermediate_size, n = c.num_experts;
  LayerWeights& l = w.layers[static_cast<size_t>(i)];
  DENSA_ASSIGN_OR_RETURN(l.router, load_matrix(src, gguf_blk(i, "ffn_gate_inp"), n, hidden));
  DENSA_ASSIGN_OR_RETURN(l.expert_gate, load_matrices(src, gguf_blk(i, "ffn_gate_exps"), n, inter, hidden));
  DENSA_ASSIGN_OR_RETURN(l.expert_up, load_matrices(src, gguf_blk(i, "ffn_up_exps"), n, inter, hidden));
  DENSA_ASSIGN_OR_RETURN(l.expert_down, load_matrices(src, gguf_blk(i, "ffn_down_exps"), n, hidden, inter));
  if (c.moe_routing == MoeRouting::kSigmoidGrouped) {
    DENSA_ASSIGN_OR_RETURN(l.router_bias, load_vector(src, "blk." + std::to_string(i) + ".exp_probs_b.bias", n));
  }
  const int64_t shared = c.shared_expert_intermediate_size;
  if (shared > 0) {
    DENSA_ASSIGN_OR_RETURN(l.shared_gate, load_matrix(src, gguf_blk(i, "ffn_gate_shexp"), shared, hidden));
    DENSA_ASSIGN_OR_RETURN(l.shared_up, load_matrix(src, gguf_blk(i, "ffn_up_shexp"), shared, hidden));
    DENSA_ASSIGN_OR_RETURN(l.shared_down, load_matrix(src, gguf_blk(i, "ffn_down_shexp"), hidden, shared));
  }
  if (c.shared_expert_gate) {
    const std::string name = gguf_blk(i, "ffn_gate_inp_shexp");
    DENSA_ASSIGN_OR_RETURN(RawTensor t, src.get(name));
    if (t.shape.size() == 1) {
      DENSA_ASSIGN_OR_RETURN(l.shared_expert_gate, load_vector(src, name, hidden));
    } else {
      DENSA_ASSIGN_OR_RETURN(WeightView g, load_matrix(src, name, 1, hidden));
      l.shared_expert_gate.resize(static_cast<size_t>(hidden));
      dequantize_row(g, 0, l.shared_expert_gate.data());
    }
  }
  return Status::ok();
}

// kv_b_proj [heads*(nope + v), kv_lora_rank] in F32, rebuilt from llama.cpp's split form:
// attn_k_b [heads, kv_lora_rank, nope] (each head's nope rows, transposed) and attn_v_b
// [heads, v, kv_lora_rank].
Result<WeightView> gguf_kv_b_from_split(const TensorSource& src, int i, ModelWeights& w) {
  const MlaConfig& m = w.config.mla;
  const int64_t heads = w.config.num_heads, C = m.kv_lora_rank, nope = m.qk_nope_head_dim, v = m.v_head_dim;
  DENSA_ASSIGN_OR_RETURN(auto k_b, load_matrices(src, gguf_blk(i, "attn_k_b"), heads, C, nope));
  DENSA_ASSIGN_OR_RETURN(auto v_b, load_matrices(src, gguf_blk(i, "attn_v_b"), heads, v, C));
  auto* out = reinterpret_cast<float*>(w.alloc_owned(static_cast<size_t>(heads * (nope + v) * C) * sizeof(float)));
  for (int64_t h = 0; h < heads; ++h) {
    const std::vector<float> kh = dequantize_matrix(k_b[static_cast<size_t>(h)]);  // [C, nope]
    const std::vector<float> vh = dequantize_matrix(v_b[static_cast<size_t>(h)]);  // [v, C]
    float* rows = out + h * (nope + v) * C;
    for (int64_t d = 0; d < nope; ++d) {
      for (int64_t c = 0; c < C; ++c) rows[d * C + c] = kh[static_cast<size_t>(c * nope + d)];
    }
    std::copy(vh.begin(), vh.end(), rows + nope * C);
  }
  return WeightView{.dtype = DType::kF32, .rows = heads * (nope + v), .cols = C, .data = out};
}

// The DSA lightning indexer of a layer (GLM-5): HF self_attn.indexer.{wq_b, wk, k_norm (weight
// and bias), weights_proj}, or llama.cpp's glm-dsa blk.N.indexer.{attn_q_b, attn_k, k_norm,
// proj}.
Status load_dsa_indexer(const TensorSource& src, int i, ModelWeights& w) {
  const ModelConfig& c = w.config;
  LayerWeights& l = w.layers[static_cast<size_t>(i)];
  const int64_t heads = c.dsa.index_n_heads, dim = c.dsa.index_head_dim;
  const std::string p = src.gguf ? "blk." + std::to_string(i) + ".indexer." : layer_tensor(i, "self_attn.indexer.");
  auto name = [&](const char* hf, const char* gguf) { return p + (src.gguf ? gguf : hf); };
  DENSA_ASSIGN_OR_RETURN(l.idx_wq_b, load_matrix(src, name("wq_b.weight", "attn_q_b.weight"), heads * dim, c.mla.q_lora_rank));
  DENSA_ASSIGN_OR_RETURN(l.idx_wk, load_matrix(src, name("wk.weight", "attn_k.weight"), dim, c.hidden_size));
  DENSA_ASSIGN_OR_RETURN(l.idx_k_norm_w, load_vector(src, p + "k_norm.weight", dim));
  DENSA_ASSIGN_OR_RETURN(l.idx_k_norm_b, load_vector(src, p + "k_norm.bias", dim));
  DENSA_ASSIGN_OR_RETURN(l.idx_weights_proj, load_matrix(src, name("weights_proj.weight", "proj.weight"), heads, c.hidden_size));
  return Status::ok();
}

// Multi-head latent attention (DeepSeek-V3 / Kimi K2): HF names, or GGUF deepseek2 names
// (attn_q_a / attn_q_a_norm / attn_q_b or attn_q, attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b
// or its split attn_k_b + attn_v_b, attn_output).
Status load_mla_attention(const TensorSource& src, int i, ModelWeights& w) {
  const ModelConfig& c = w.config;
  const MlaConfig& m = c.mla;
  const bool g = src.gguf;
  LayerWeights& l = w.layers[static_cast<size_t>(i)];
  const int64_t hidden = c.hidden_size, heads = c.num_heads;
  const int64_t q_dim = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim);
  auto name = [&](const char* hf, const char* gguf) { return layer_name(g, i, hf, gguf); };
  if (m.q_lora_rank > 0) {
    DENSA_ASSIGN_OR_RETURN(l.q_a, load_matrix(src, name("self_attn.q_a_proj", "attn_q_a"), m.q_lora_rank, hidden));
    DENSA_ASSIGN_OR_RETURN(l.q_a_norm,
                           load_vector(src, name("self_attn.q_a_layernorm", "attn_q_a_norm"), m.q_lora_rank));
    DENSA_ASSIGN_OR_RETURN(l.q_b, load_matrix(src, name("self_attn.q_b_proj", "attn_q_b"), q_dim, m.q_lora_rank));
  } else {
    DENSA_ASSIGN_OR_RETURN(l.wq, load_matrix(src, name("self_attn.q_proj", "attn_q"), q_dim, hidden));
  }
  DENSA_ASSIGN_OR_RETURN(l.kv_a, load_matrix(src, name("self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"),
                                             m.kv_lora_rank + m.qk_rope_head_dim, hidden));
  DENSA_ASSIGN_OR_RETURN(l.kv_a_norm,
                         load_vector(src, name("self_attn.kv_a_layernorm", "attn_kv_a_norm"), m.kv_lora_rank));
  const int64_t kv_b_rows = heads * (m.qk_nope_head_dim + m.v_head_dim);
  if (g && !src.has(gguf_blk(i, "attn_kv_b"))) {
    DENSA_ASSIGN_OR_RETURN(l.kv_b, gguf_kv_b_from_split(src, i, w));
  } else {
    DENSA_ASSIGN_OR_RETURN(l.kv_b,
                           load_matrix(src, name("self_attn.kv_b_proj", "attn_kv_b"), kv_b_rows, m.kv_lora_rank));
  }
  DENSA_ASSIGN_OR_RETURN(l.wo, load_matrix(src, name("self_attn.o_proj", "attn_output"), hidden, heads * m.v_head_dim));
  if (c.is_dsa()) DENSA_RETURN_IF_ERROR(load_dsa_indexer(src, i, w));
  return Status::ok();
}

Status load_layer(const TensorSource& src, int i, ModelWeights& w) {
  const ModelConfig& c = w.config;
  const bool g = src.gguf;
  const int64_t hidden = c.hidden_size, q_dim = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim, inter = c.intermediate_size;
  LayerWeights& l = w.layers[static_cast<size_t>(i)];
  DENSA_ASSIGN_OR_RETURN(l.attn_norm, load_vector(src, layer_name(g, i, "input_layernorm", "attn_norm"), hidden));
  DENSA_ASSIGN_OR_RETURN(l.ffn_norm,
                         load_vector(src, layer_name(g, i, "post_attention_layernorm", "ffn_norm"), hidden));
  if (c.is_mla()) {
    DENSA_RETURN_IF_ERROR(load_mla_attention(src, i, w));
  } else {
    DENSA_ASSIGN_OR_RETURN(l.wq, load_matrix(src, layer_name(g, i, "self_attn.q_proj", "attn_q"), q_dim, hidden));
    DENSA_ASSIGN_OR_RETURN(l.wk, load_matrix(src, layer_name(g, i, "self_attn.k_proj", "attn_k"), kv_dim, hidden));
    DENSA_ASSIGN_OR_RETURN(l.wv, load_matrix(src, layer_name(g, i, "self_attn.v_proj", "attn_v"), kv_dim, hidden));
    DENSA_ASSIGN_OR_RETURN(l.wo, load_matrix(src, layer_name(g, i, "self_attn.o_proj", "attn_output"), hidden, q_dim));
    DENSA_RETURN_IF_ERROR(load_attention_extras(src, i, w));
  }
  // llama.cpp permutes Q/K rows for llama-style RoPE only; the Qwen / GLM / DeepSeek files
  // keep the checkpoint's order (NeoX rotate-half, DeepSeek's interleaved rope dims).
  if (g && (c.architecture == "LlamaForCausalLM" || c.architecture == "MixtralForCausalLM")) {
    l.wq = unpermute_rows(w, l.wq, c.num_heads, c.head_dim);
    l.wk = unpermute_rows(w, l.wk, c.num_kv_heads, c.head_dim);
  }
  if (!c.is_moe_layer(i)) {
    DENSA_ASSIGN_OR_RETURN(l.w_gate, load_matrix(src, layer_name(g, i, "mlp.gate_proj", "ffn_gate"), inter, hidden));
    DENSA_ASSIGN_OR_RETURN(l.w_up, load_matrix(src, layer_name(g, i, "mlp.up_proj", "ffn_up"), inter, hidden));
    DENSA_ASSIGN_OR_RETURN(l.w_down, load_matrix(src, layer_name(g, i, "mlp.down_proj", "ffn_down"), hidden, inter));
    return Status::ok();
  }
  return g ? load_gguf_moe(src, i, w) : load_hf_moe(src, i, w);
}

// Fills every tensor of `w` (config already set) from `src`.
Status load_tensors(const TensorSource& src, ModelWeights& w) {
  const ModelConfig& c = w.config;
  const bool g = src.gguf;
  const std::string embed = g ? "token_embd.weight" : "model.embed_tokens.weight";
  const std::string head = g ? "output.weight" : "lm_head.weight";
  DENSA_ASSIGN_OR_RETURN(w.tok_embeddings, load_matrix(src, embed, c.vocab_size, c.hidden_size));
  DENSA_ASSIGN_OR_RETURN(w.final_norm, load_vector(src, g ? "output_norm.weight" : "model.norm.weight", c.hidden_size));
  if (c.tie_word_embeddings) {
    w.lm_head = w.tok_embeddings;
  } else {
    DENSA_ASSIGN_OR_RETURN(w.lm_head, load_matrix(src, head, c.vocab_size, c.hidden_size));
  }
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) DENSA_RETURN_IF_ERROR(load_layer(src, i, w));
  return Status::ok();
}

// ---- GGUF ----

// Whether densa reads ggml type `id` as one of its DTypes.
bool ggml_type_of_dtype_known(uint32_t id) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    if (ggml_type_of(d) == id) return true;
  }
  return false;
}

// A GGUF tensor as a RawTensor: the mapped bytes for the DType formats (f32, f16, bf16, q8_0,
// q4_0); the other block formats (quant/ggml_blocks.h: q4_1 ... q6_K, iq4_nl, iq4_xs, mxfp4)
// converted once into a buffer owned by w: affine rows (quant/affine_rows.h: the file's exact
// values at 5-10 bits per weight, run by the W8A8 kernels) where rows are whole 128-column
// blocks, else fp32, the values ggml's dequantizer gives (4 bytes per weight).
Result<RawTensor> gguf_raw_tensor(const GgufFile& f, const std::string& name, ModelWeights& w,
                                  std::optional<AffineWidth> affine,
                                  std::map<std::string, RawTensor, std::less<>>& converted) {
  if (const auto it = converted.find(name); it != converted.end()) return it->second;
  const GgufTensorInfo* info = f.tensor_info(name);
  if (info == nullptr) return not_found(f.path().string() + ": missing tensor '" + name + "'");
  const GgmlBlockFormat* fmt = ggml_block_format(info->ggml_type);
  if (fmt == nullptr && !ggml_type_of_dtype_known(info->ggml_type)) {
    std::string known;
    for (const GgmlBlockFormat& b : ggml_block_formats()) known += std::string(", ") + b.name;
    return unimplemented(f.path().string() + ": tensor '" + name + "' has type " + ggml_type_name(info->ggml_type) +
                         ", which densa does not support (supported: f32, f16, bf16, q8_0, q4_0" + known + ")");
  }
  DENSA_ASSIGN_OR_RETURN(GgufTensorBytes t, f.tensor_bytes(name));
  std::vector<int64_t> shape(t.ne.rbegin(), t.ne.rend());
  if (t.dtype.has_value()) return RawTensor{t.name, *t.dtype, std::move(shape), t.data};
  int64_t numel = 1;
  for (int64_t d : t.ne) numel *= d;
  const int64_t cols = t.ne.empty() ? 0 : t.ne[0];
  if (const std::optional<DType> a = affine.has_value() ? affine_dtype_for_ggml(info->ggml_type, *affine) : std::nullopt;
      a.has_value() && cols > 0 && cols % kAffineBlock == 0) {
    const int64_t rows = numel / cols;
    uint8_t* out = w.alloc_owned(static_cast<size_t>(rows * dtype_row_bytes(*a, cols)));
    if (affine_from_ggml(info->ggml_type, *a, t.data, rows, cols, out)) {
      RawTensor r{t.name, *a, std::move(shape), out};
      converted.emplace(name, r);
      return r;
    }
    // A non-finite scale somewhere: fp32 below keeps ggml's values (the buffer stays unused).
  }
  auto* out = reinterpret_cast<float*>(w.alloc_owned(static_cast<size_t>(numel) * sizeof(float)));
  fmt->dequantize(t.data, numel, out);  // rows are whole blocks, so the tensor is one run of blocks
  RawTensor r{t.name, DType::kF32, std::move(shape), reinterpret_cast<const uint8_t*>(out)};
  converted.emplace(name, r);
  return r;
}

// affine: the block types of quant/affine_rows.h as affine rows of that width (for the
// kernels), or (nullopt) as fp32.
Result<ModelWeights> load_gguf(const std::filesystem::path& path, std::optional<AffineWidth> affine) {
  DENSA_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
  ModelWeights w;
  w.source = path.string();
  w.format = "gguf";
  DENSA_ASSIGN_OR_RETURN(w.config, gguf_model_config(f));
  TensorSource src;
  src.origin = path.string();
  src.gguf = true;
  std::map<std::string, RawTensor, std::less<>> converted;  // each tensor converted once
  src.get = [&f, &w, &converted, affine](const std::string& name) {
    return gguf_raw_tensor(f, name, w, affine, converted);
  };
  src.has = [&f](const std::string& name) { return f.has_tensor(name); };
  DENSA_RETURN_IF_ERROR(load_tensors(src, w));
  DENSA_ASSIGN_OR_RETURN(std::optional<Tokenizer> tok, gguf_tokenizer(f));
  if (tok) {
    w.tokenizer = std::make_unique<Tokenizer>(std::move(*tok));
    w.text_assets.eos_ids = w.tokenizer->eos_ids();
    if (w.tokenizer->bos_id() >= 0) w.text_assets.bos_token = w.tokenizer->vocab().pieces[w.tokenizer->bos_id()];
    if (w.tokenizer->eos_id() >= 0) w.text_assets.eos_token = w.tokenizer->vocab().pieces[w.tokenizer->eos_id()];
  }
  w.chat_template = f.get_string("tokenizer.chat_template").value_or("");
  w.text_assets.chat_template = w.chat_template;
  if (!w.chat_template.empty()) w.text_assets.chat_templates.push_back({"default", w.chat_template});
  w.files.push_back(f.release_file());
  return w;
}

// ---- Hugging Face directory ----

Result<ModelWeights> load_hf(const std::filesystem::path& dir) {
  ModelWeights w;
  w.source = dir.string();
  w.format = "hf";
  DENSA_ASSIGN_OR_RETURN(w.config, parse_hf_config(dir / "config.json"));
  DENSA_ASSIGN_OR_RETURN(SafetensorsDir st, SafetensorsDir::open(dir));
  TensorSource src;
  src.origin = dir.string();
  // Names are the text model's; a multimodal wrapper keeps them under a prefix. Every name
  // read is recorded, so what is left over can be accounted for (hf_tensor_inventory.h).
  const std::string prefix = w.config.hf_tensor_prefix;
  std::set<std::string> read;
  src.get = [&st, &read, prefix](const std::string& name) -> Result<RawTensor> {
    read.insert(prefix + name);
    DENSA_ASSIGN_OR_RETURN(SafetensorsTensor t, st.tensor(prefix + name));
    return RawTensor{t.name, *t.dtype, t.shape, t.data};
  };
  src.has = [&st, prefix](const std::string& name) { return st.has_tensor(prefix + name); };
  DENSA_ASSIGN_OR_RETURN(HfQuantConfig qc, parse_hf_quant_config(dir / "config.json"));
  src.get_quantized = [&st, &w, &read, qc, prefix](const std::string& name, int64_t rows, int64_t cols) {
    read.insert(prefix + name);
    return load_hf_quantized_matrix(st, qc, prefix + name, rows, cols, w);
  };
  DENSA_RETURN_IF_ERROR(load_tensors(src, w));
  std::vector<CheckpointTensor> all;
  for (const SafetensorsTensor* t : st.all_tensors()) all.push_back({t->name, static_cast<int64_t>(t->nbytes)});
  DENSA_ASSIGN_OR_RETURN(w.skipped, classify_unread_hf_tensors(all, read, w.config, dir.string()));
  for (const std::string& line : describe_skipped(w.skipped, w.config)) {
    std::fprintf(stderr, "densa: %s: %s\n", dir.string().c_str(), line.c_str());
  }
  // tokenizer.json, else tiktoken.model, else tokenizer.model (text/tokenizer_loader.h).
  if (has_tokenizer_files(dir)) {
    DENSA_ASSIGN_OR_RETURN(LoadedTokenizer lt, load_tokenizer(dir));
    w.tokenizer = std::make_unique<Tokenizer>(std::move(lt.tokenizer));
    w.text_assets = std::move(lt.assets);
  } else {
    DENSA_ASSIGN_OR_RETURN(w.text_assets, read_text_assets(dir));
  }
  w.chat_template = w.text_assets.chat_template;
  for (auto& file : st.release_files()) w.files.push_back(std::move(file));
  return w;
}

Result<ModelWeights> load_stored(const std::filesystem::path& path, std::optional<AffineWidth> affine) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return load_hf(path);
  if (!std::filesystem::exists(path, ec)) return not_found(path.string() + ": no such file or directory");
  return load_gguf(path, affine);
}

}  // namespace

Result<ModelWeights> load_model(const std::filesystem::path& path, const LoadOptions& options) {
  // Unsupported targets fail before the (possibly large) load.
  std::optional<WeightQuantSpec> body;
  if (options.weight_dtype.has_value()) {
    body = WeightQuantSpec{*options.weight_dtype, options.weight_group_size};
    DENSA_RETURN_IF_ERROR(check_quant_target(*body, 0, 0));
  }
  if (options.lm_head.has_value()) {
    if (Status s = check_quant_target(*options.lm_head, 0, 0); !s.is_ok()) {
      return invalid_argument("lm_head: " + s.message());
    }
  }
  std::optional<AffineWidth> affine;
  if (options.prepare_for_kernels && options.ggml_blocks != GgmlBlockForm::kF32) {
    affine = options.ggml_blocks == GgmlBlockForm::kPacked ? AffineWidth::kPacked : AffineWidth::kWide;
  }
  DENSA_ASSIGN_OR_RETURN(ModelWeights w, load_stored(path, affine));
  DENSA_RETURN_IF_ERROR(shard_weights(w, options.parallel));
  // Set before any conversion, so quantize-on-load and repacking write tiles directly.
  if (options.prepare_for_kernels) {
    const WeightLayout l = options.int4_layout.value_or(matmul_int4_layout());
    CHECK(matmul_runs_int4_layout(l)) << "load_model: INT4 layout " << static_cast<int>(l) << " does not run here";
    w.int4_layout = l;
  }
  w.int8_tiles = options.prepare_for_kernels && options.int8_tiles && matmul_prefers_int8_tiles();
  w.affine_tiles = options.prepare_for_kernels && options.int8_tiles && matmul_prefers_affine_tiles();
  if (body) DENSA_RETURN_IF_ERROR(quantize_weights(w, *body));
  if (options.lm_head) DENSA_RETURN_IF_ERROR(quantize_lm_head(w, *options.lm_head));
  if (options.prepare_for_kernels) {
    prepare_mla_weights(w);  // from kv_b as quantized
    repack_ggml_for_kernels(w);
    move_matrices_to_arena(w);
  }
  if (options.bf16_f32_activations) set_half_float_amx(w, AmxUse::kOff);
  return w;
}

}  // namespace densa
