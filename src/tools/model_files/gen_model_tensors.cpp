#include "tools/model_files/gen_model_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/gguf_file.h"
#include "quant/fp8_block.h"
#include "quant/quantize_matrix.h"

namespace densa::gen_model_internal {

bool hf_only(const LogicalTensor& t) { return t.gguf_name.empty(); }
bool gguf_only(const LogicalTensor& t) { return t.derive != Derive::kNone; }

void add_experts(std::vector<LogicalTensor>& t, const std::string& p, const std::string& g, const std::string& prefix,
                 const char* gate, const char* up, const char* down, int experts, int64_t f, int64_t h) {
  for (int e = 0; e < experts; ++e) {
    const std::string x = p + prefix + std::to_string(e) + ".";
    t.push_back({x + gate, g + "ffn_gate_exps.weight", f, h, Role::kMatrix, e});
    t.push_back({x + up, g + "ffn_up_exps.weight", f, h, Role::kMatrix, e});
    t.push_back({x + down, g + "ffn_down_exps.weight", h, f, Role::kMatrix, e});
  }
}

void add_dense_ffn(std::vector<LogicalTensor>& t, const std::string& p, const std::string& g, const std::string& mlp,
                   const std::string& suffix, int64_t f, int64_t h) {
  t.push_back({p + mlp + "gate_proj", g + "ffn_gate" + suffix + ".weight", f, h, Role::kMatrix});
  t.push_back({p + mlp + "up_proj", g + "ffn_up" + suffix + ".weight", f, h, Role::kMatrix});
  t.push_back({p + mlp + "down_proj", g + "ffn_down" + suffix + ".weight", h, f, Role::kMatrix});
}

// DeepSeek-V3's attention: q_a / q_b (or q_proj), kv_a_proj_with_mqa, kv_b_proj (HF) whose
// GGUF form is attn_k_b [heads, kv_lora, nope] + attn_v_b [heads, v, kv_lora], o_proj.
void add_mla(std::vector<LogicalTensor>& t, const ModelConfig& c, const std::string& p, const std::string& g) {
  const MlaConfig& m = c.mla;
  const int64_t h = c.hidden_size, heads = c.num_heads, C = m.kv_lora_rank, nope = m.qk_nope_head_dim;
  const int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim, v = m.v_head_dim;
  if (m.q_lora_rank > 0) {
    t.push_back({p + "self_attn.q_a_proj", g + "attn_q_a.weight", m.q_lora_rank, h, Role::kMatrix});
    t.push_back({p + "self_attn.q_a_layernorm", g + "attn_q_a_norm.weight", 1, m.q_lora_rank, Role::kNorm});
    t.push_back({p + "self_attn.q_b_proj", g + "attn_q_b.weight", heads * qk, m.q_lora_rank, Role::kMatrix});
  } else {
    t.push_back({p + "self_attn.q_proj", g + "attn_q.weight", heads * qk, h, Role::kMatrix});
  }
  t.push_back({p + "self_attn.kv_a_proj_with_mqa", g + "attn_kv_a_mqa.weight", C + m.qk_rope_head_dim, h, Role::kMatrix});
  t.push_back({p + "self_attn.kv_a_layernorm", g + "attn_kv_a_norm.weight", 1, C, Role::kNorm});
  const std::string kv_b = p + "self_attn.kv_b_proj";
  t.push_back({kv_b, "", heads * (nope + v), C, Role::kMatrix});
  LogicalTensor k_b{kv_b, g + "attn_k_b.weight", heads * C, nope, Role::kMatrix};
  k_b.derive = Derive::kKB;
  k_b.gguf_ne = {nope, C, heads};
  t.push_back(k_b);
  LogicalTensor v_b{kv_b, g + "attn_v_b.weight", heads * v, C, Role::kMatrix};
  v_b.derive = Derive::kVB;
  v_b.gguf_ne = {C, v, heads};
  t.push_back(v_b);
  t.push_back({p + "self_attn.o_proj", g + "attn_output.weight", h, heads * v, Role::kMatrix});
}

std::vector<LogicalTensor> model_tensors(const ModelConfig& c) {
  std::vector<LogicalTensor> t;
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t f = c.intermediate_size, fe = c.moe_intermediate_size;
  const bool mixtral = c.architecture == "MixtralForCausalLM", llama_gguf = mixtral || c.architecture == "LlamaForCausalLM";
  t.push_back({"model.embed_tokens", "token_embd.weight", c.vocab_size, h, Role::kEmbedding});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".", g = "blk." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm", g + "attn_norm.weight", 1, h, Role::kNorm});
    if (c.is_mla()) {
      add_mla(t, c, p, g);
    } else {
      const int permute = llama_gguf ? 1 : 0;  // only llama.cpp's "llama" permutes Q/K rows
      t.push_back({p + "self_attn.q_proj", g + "attn_q.weight", q, h, Role::kMatrix, -1, permute * c.num_heads, c.head_dim});
      t.push_back({p + "self_attn.k_proj", g + "attn_k.weight", kv, h, Role::kMatrix, -1, permute * c.num_kv_heads, c.head_dim});
      t.push_back({p + "self_attn.v_proj", g + "attn_v.weight", kv, h, Role::kMatrix});
      t.push_back({p + "self_attn.o_proj", g + "attn_output.weight", h, q, Role::kMatrix});
      if (c.qk_norm) {
        t.push_back({p + "self_attn.q_norm", g + "attn_q_norm.weight", 1, c.head_dim, Role::kNorm});
        t.push_back({p + "self_attn.k_norm", g + "attn_k_norm.weight", 1, c.head_dim, Role::kNorm});
      }
    }
    t.push_back({p + "post_attention_layernorm", g + "ffn_norm.weight", 1, h, Role::kNorm});
    if (!c.is_moe_layer(i)) {
      add_dense_ffn(t, p, g, "mlp.", "", f, h);
      continue;
    }
    if (mixtral) {
      t.push_back({p + "block_sparse_moe.gate", g + "ffn_gate_inp.weight", c.num_experts, h, Role::kRouter});
      add_experts(t, p, g, "block_sparse_moe.experts.", "w1", "w3", "w2", c.num_experts, f, h);
      continue;
    }
    t.push_back({p + "mlp.gate", g + "ffn_gate_inp.weight", c.num_experts, h, Role::kRouter});
    if (c.moe_routing == MoeRouting::kSigmoidGrouped) {
      t.push_back({p + "mlp.gate.e_score_correction_bias", g + "exp_probs_b.bias", 1, c.num_experts, Role::kBias});
    }
    add_experts(t, p, g, "mlp.experts.", "gate_proj", "up_proj", "down_proj", c.num_experts, fe, h);
    if (c.shared_expert_intermediate_size > 0) {
      add_dense_ffn(t, p, g, "mlp.shared_experts.", "_shexp", c.shared_expert_intermediate_size, h);
    }
  }
  t.push_back({"model.norm", "output_norm.weight", 1, h, Role::kNorm});
  t.push_back({"lm_head", "output.weight", c.vocab_size, h, Role::kHead});
  return t;
}

// ---- values ----

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

float round_to(BaseType b, float v) {
  switch (b) {
    case BaseType::kF32: return v;
    case BaseType::kF16: return f16_to_f32(f32_to_f16(v));
    case BaseType::kBF16: return bf16_to_f32(f32_to_bf16(v));
  }
  return v;
}

std::vector<float> tensor_values(const LogicalTensor& t, uint64_t seed, BaseType base) {
  std::vector<float> v(static_cast<size_t>(t.rows * t.cols));
  if (t.role == Role::kNorm) {
    std::fill(v.begin(), v.end(), 1.0f);
    return v;
  }
  // A correction bias is stored in F32 in both formats (as DeepSeek-V3 ships it); 0.1 moves
  // the sigmoid scores' ranking without swamping it.
  if (t.role == Role::kBias) base = BaseType::kF32;
  const double stddev = t.role == Role::kEmbedding ? 1.0 : t.role == Role::kBias ? 0.1
                                                                                 : 1.0 / std::sqrt(static_cast<double>(t.cols));
  const float a = static_cast<float>(stddev * std::sqrt(3.0));  // uniform(-a, a) has this stddev
  uint64_t s = seed ^ name_hash(t.hf_name);
  for (float& x : v) {
    const float u = static_cast<float>(splitmix64(s) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    x = round_to(base, (2.0f * u - 1.0f) * a);
  }
  return v;
}

// The values of any logical tensor: a derived one from its source's stream, rearranged as
// llama.cpp's converter splits kv_b_proj [heads * (nope + v), kv_lora]: attn_k_b holds each
// head's nope rows transposed ([heads][kv_lora][nope]), attn_v_b its v rows ([heads][v][kv_lora]).
std::vector<float> logical_values(const LogicalTensor& t, const ModelConfig& c, uint64_t seed, BaseType base) {
  if (t.derive == Derive::kNone) return tensor_values(t, seed, base);
  const int64_t heads = c.num_heads, C = c.mla.kv_lora_rank, nope = c.mla.qk_nope_head_dim, vd = c.mla.v_head_dim;
  LogicalTensor src{t.hf_name, "", heads * (nope + vd), C, Role::kMatrix};
  const std::vector<float> f = tensor_values(src, seed, base);
  std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
  for (int64_t hd = 0; hd < heads; ++hd) {
    const float* rows = f.data() + hd * (nope + vd) * C;
    if (t.derive == Derive::kKB) {
      for (int64_t d = 0; d < nope; ++d) {
        for (int64_t col = 0; col < C; ++col) out[static_cast<size_t>((hd * C + col) * nope + d)] = rows[d * C + col];
      }
    } else {
      std::copy(rows + nope * C, rows + (nope + vd) * C, out.begin() + hd * vd * C);
    }
  }
  return out;
}


bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

const char* st_name_of(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kFP8E4M3: return "F8_E4M3";
    case DType::kI32: return "I32";
    case DType::kQ8_0: case DType::kQ4_0: case DType::kI4: case DType::kI8: case DType::kU8:
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4: case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: break;
  }
  return "U8";
}

DType base_dtype(BaseType b) {
  switch (b) {
    case BaseType::kF32: return DType::kF32;
    case BaseType::kF16: return DType::kF16;
    case BaseType::kBF16: return DType::kBF16;
  }
  return DType::kF32;
}

// The dtype a logical tensor is stored in.
DType stored_dtype(const Target& tg, const LogicalTensor& t) {
  switch (t.role) {
    case Role::kMatrix:
      // A derived GGUF tensor whose rows a block format cannot split stays F32 (as
      // densa quantize writes it); every other matrix must fit (checked up front).
      if (gguf_only(t) && !is_float(tg.matrix) &&
          !check_quant_target(WeightQuantSpec{tg.matrix, tg.group_size}, t.rows, t.cols).is_ok()) {
        return DType::kF32;
      }
      return tg.matrix;
    case Role::kBias: return DType::kF32;
    case Role::kHead:
      if (tg.head) return *tg.head;
      return tg.gguf ? tg.matrix : base_dtype(tg.base);
    case Role::kEmbedding:
      return tg.gguf ? tg.matrix : base_dtype(tg.base);
    case Role::kRouter: case Role::kNorm:
      return tg.gguf ? DType::kF32 : base_dtype(tg.base);
  }
  return DType::kF32;
}

std::vector<int64_t> st_shape(const LogicalTensor& t) {
  return t.role == Role::kNorm || t.role == Role::kBias ? std::vector<int64_t>{t.cols} : std::vector<int64_t>{t.rows, t.cols};
}

// The parts `t` is stored as (sizes only; encode() fills the bytes in the same order).
std::vector<Part> parts_of(const Target& tg, const LogicalTensor& t) {
  const DType d = stored_dtype(tg, t);
  if (tg.gguf) return {Part{"", "", ggml_type_of(d).value_or(0), st_shape(t), t.rows * dtype_row_bytes(d, t.cols)}};
  switch (d) {
    case DType::kFP8E4M3: {
      const int64_t sr = fp8_block_scale_rows(t.rows), sc = fp8_block_scale_cols(t.cols);
      return {Part{".weight", "F8_E4M3", 0, {t.rows, t.cols}, t.rows * t.cols},
              Part{".weight_scale_inv", "F32", 0, {sr, sc}, sr * sc * 4}};
    }
    case DType::kI4: {
      const int64_t groups = t.cols / tg.group_size;
      return {Part{".weight_packed", "I32", 0, {t.rows, t.cols / 8}, t.rows * t.cols / 2},
              Part{".weight_scale", "BF16", 0, {t.rows, groups}, t.rows * groups * 2},
              Part{".weight_shape", "I32", 0, {2}, 8}};
    }
    case DType::kF32: case DType::kF16: case DType::kBF16:
      return {Part{t.role == Role::kBias ? "" : ".weight", st_name_of(d), 0, st_shape(t), t.rows * t.cols * static_cast<int64_t>(d == DType::kF32 ? 4 : 2)}};
    case DType::kQ8_0: case DType::kQ4_0: case DType::kI8: case DType::kI32: case DType::kU8:
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4: case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: break;
  }
  return {};
}

void append(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

// The bytes of each part of parts_of(tg, t), from fp32 values (HF row order).
std::vector<std::vector<uint8_t>> encode(const Target& tg, const LogicalTensor& t, const std::vector<float>& values) {
  const DType d = stored_dtype(tg, t);
  std::vector<std::vector<uint8_t>> out(1);
  std::vector<uint8_t>& main = out[0];
  switch (d) {
    case DType::kF32: append(main, values.data(), values.size() * 4); break;
    case DType::kF16: case DType::kBF16: {
      main.resize(values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t h = d == DType::kF16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
        std::memcpy(main.data() + 2 * i, &h, 2);
      }
      break;
    }
    case DType::kQ8_0: case DType::kQ4_0: case DType::kFP8E4M3: case DType::kI4: {
      const QuantizedMatrix q = quantize_matrix(values.data(), t.rows, t.cols, WeightQuantSpec{d, tg.group_size});
      append(main, q.view.data, static_cast<size_t>(q.view.bytes()));
      if (d == DType::kFP8E4M3) {
        out.emplace_back();
        append(out[1], q.view.scales_f32, static_cast<size_t>(q.view.scale_bytes()));
      } else if (d == DType::kI4) {
        out.emplace_back();
        append(out[1], q.view.scales_bf16, static_cast<size_t>(q.view.scale_bytes()));  // BF16 as held
        const int32_t dims[2] = {static_cast<int32_t>(t.rows), static_cast<int32_t>(t.cols)};
        out.emplace_back();
        append(out[2], dims, 8);
      }
      break;
    }
    case DType::kI8: case DType::kI32: case DType::kU8: case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4: case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: break;
  }
  if (tg.gguf && t.gguf_permute_heads > 0) {
    // GGUF row base + 2i + h holds HF row base + h*half + i (what the loader undoes).
    const int64_t rb = static_cast<int64_t>(main.size()) / t.rows, half = t.head_dim / 2;
    std::vector<uint8_t> p(main.size());
    for (int64_t head = 0; head < t.gguf_permute_heads; ++head) {
      const int64_t base = head * t.head_dim;
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t i = 0; i < half; ++i) {
          std::memcpy(p.data() + (base + 2 * i + h) * rb, main.data() + (base + h * half + i) * rb, static_cast<size_t>(rb));
        }
      }
    }
    main = std::move(p);
  }
  return out;
}

}  // namespace densa::gen_model_internal
