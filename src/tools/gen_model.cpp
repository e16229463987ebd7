#include "tools/gen_model.h"
#include "tools/gen_model_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/gguf_file.h"
#include "model/gguf_config.h"
#include "quant/fp8_block.h"
#include "quant/quantize_matrix.h"
#include "text/tokenizer_loader.h"
#include "tools/gguf_model_writer.h"
#include "tools/gguf_writer.h"

namespace densa {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// ---- the tensors of a model, independent of the file format ----

enum class Role { kMatrix, kEmbedding, kHead, kRouter, kNorm, kBias };

// A GGUF tensor computed from another tensor's values (deepseek2's split kv_b_proj).
enum class Derive { kNone, kKB, kVB };

// One logical tensor (Hugging Face naming; a norm or bias is rows = 1).
struct LogicalTensor {
  std::string hf_name;   // without ".weight" (a kBias: the whole name); names the value stream
  std::string gguf_name; // with ".weight"; stacked experts share it; "" = HF only
  int64_t rows = 0, cols = 0;
  Role role = Role::kMatrix;
  int expert_idx = -1;       // >= 0: slice expert_idx of a GGUF stacked tensor
  int gguf_permute_heads = 0;  // Q/K: heads whose rows GGUF interleaves
  int head_dim = 0;
  Derive derive = Derive::kNone;  // != kNone: GGUF only, values derived from hf_name's
  std::vector<int64_t> gguf_ne;   // the GGUF shape when not [cols, rows]
};

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

// The float type values are rounded to before storing: the checkpoint's own float type.
enum class BaseType { kF32, kF16, kBF16 };

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

// ---- encodings ----

// One stored piece of a logical tensor in a file.
struct Part {
  std::string suffix;          // HF: ".weight", ".weight_scale_inv", ...; GGUF: ""
  std::string st_dtype;        // safetensors dtype name (HF)
  uint32_t ggml_type = 0;      // GGUF
  std::vector<int64_t> shape;  // outermost first
  int64_t nbytes = 0;
};

struct Target {
  bool gguf = true;
  BaseType base = BaseType::kBF16;
  DType matrix = DType::kBF16;  // attention, FFN, experts (GGUF: also embeddings and lm_head)
  std::optional<DType> head;    // lm_head, when chosen apart (GenModelOptions::lm_head_dtype)
  int group_size = 32;
  bool byte_vocab = false;      // GenModelOptions::tokenizer == "bytes"
  const Tokenizer* tokenizer = nullptr;  // a real tokenizer for GGUF's tokenizer.ggml.*
  std::string chat_template;             // with it: tokenizer.chat_template
};

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

// ---- files ----

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

Status write_at(std::fstream& f, const fs::path& path, int64_t offset, const std::vector<uint8_t>& bytes) {
  f.seekp(offset);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) return data_loss(path.string() + ": write failed at offset " + std::to_string(offset));
  return Status::ok();
}

Json config_json(const ModelConfig& c, const Target& tg, const std::string& dtype) {
  Json j;
  const bool qwen3 = c.architecture == "Qwen3MoeForCausalLM", deepseek = c.architecture == "DeepseekV3ForCausalLM";
  const bool mixtral = c.architecture == "MixtralForCausalLM";
  j["architectures"] = {c.architecture};
  j["model_type"] = qwen3 ? "qwen3_moe" : deepseek ? "deepseek_v3" : mixtral ? "mixtral" : "llama";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  if (!deepseek) j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["tie_word_embeddings"] = false;
  j["attention_bias"] = false;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  if (mixtral) {
    j["num_local_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
  }
  if (qwen3) {
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = Json::array();
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["rope_scaling"] = nullptr;
  }
  if (deepseek) {
    const MlaConfig& m = c.mla;
    j["q_lora_rank"] = m.q_lora_rank > 0 ? Json(m.q_lora_rank) : Json(nullptr);
    j["kv_lora_rank"] = m.kv_lora_rank;
    j["qk_nope_head_dim"] = m.qk_nope_head_dim;
    j["qk_rope_head_dim"] = m.qk_rope_head_dim;
    j["v_head_dim"] = m.v_head_dim;
    j["n_routed_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["n_shared_experts"] = c.moe_intermediate_size > 0 ? c.shared_expert_intermediate_size / c.moe_intermediate_size : 0;
    j["first_k_dense_replace"] = c.first_k_dense_replace;
    j["moe_layer_freq"] = 1;
    j["n_group"] = c.n_group;
    j["topk_group"] = c.topk_group;
    j["topk_method"] = "noaux_tc";
    j["scoring_func"] = "sigmoid";
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["routed_scaling_factor"] = c.routed_scaling_factor;
    j["num_nextn_predict_layers"] = 0;
    j["rope_scaling"] = nullptr;
  }
  j["torch_dtype"] = tg.base == BaseType::kF32 ? "float32" : tg.base == BaseType::kF16 ? "float16" : "bfloat16";
  if (dtype == "fp8") {
    j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                {"weight_block_size", {kFp8BlockRows, kFp8BlockCols}}};
  } else if (dtype == "int4") {
    Json w = {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"},
              {"group_size", tg.group_size}, {"dynamic", false}, {"actorder", nullptr}, {"observer", "minmax"}};
    const bool head_int4 = tg.head == DType::kI4;  // then "Linear" covers lm_head too
    const std::string router = mixtral ? "re:.*block_sparse_moe.gate$" : "re:.*mlp.gate$";
    j["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"},
                                {"quantization_status", "compressed"},
                                {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}}}}},
                                {"ignore", head_int4 ? Json{router} : Json{"lm_head", router}}};
  }
  j["densa_generated"] = "random weights from densa gen-model";
  return j;
}

// The byte-level SentencePiece vocabulary of `--tokenizer bytes` (GGUF token types: 1 normal,
// 2 unknown, 3 control, 6 byte): <unk>, <s>, </s>, the 256 byte tokens, "▁", then filler
// pieces "▁densa<id>". Every text encodes to byte tokens and "▁" (no filler can be reached by
// merges: "▁d" is not in the vocabulary), so any UTF-8 text round-trips.
struct ByteVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

ByteVocab byte_vocab(const ModelConfig& c) {
  ByteVocab v;
  const int n = c.vocab_size;
  v.pieces.reserve(static_cast<size_t>(n));
  v.pieces = {"<unk>", "<s>", "</s>"};
  v.types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    v.pieces.emplace_back(piece);
    v.types.push_back(6);
  }
  v.pieces.emplace_back("\xe2\x96\x81");  // "▁": a space is one token, as in real SentencePiece vocabularies
  v.types.push_back(1);
  for (int i = static_cast<int>(v.pieces.size()); i < n; ++i) {
    v.pieces.push_back("\xe2\x96\x81" "densa" + std::to_string(i));  // "▁densa<i>"
    v.types.push_back(1);
  }
  v.scores.resize(v.pieces.size());
  for (size_t i = 260; i < v.scores.size(); ++i) v.scores[i] = -static_cast<float>(i);
  return v;
}

using Metadata = std::vector<std::pair<std::string, GgufValue>>;

GgufValue gguf_u32(int64_t v) {
  GgufValue g;
  g.type = GgufType::kU32;
  g.integer = v;
  return g;
}
GgufValue gguf_f32(double v) {
  GgufValue g;
  g.type = GgufType::kF32;
  g.real = v;
  return g;
}
GgufValue gguf_str(std::string v) {
  GgufValue g;
  g.type = GgufType::kString;
  g.str = std::move(v);
  return g;
}

// The "llama" architecture's metadata (model/gguf_config.h does not write it: its Q/K rows
// must be permuted, which only this writer does).
Metadata llama_metadata(const ModelConfig& c, uint32_t file_type) {
  Metadata md;
  md.emplace_back("general.architecture", gguf_str("llama"));
  md.emplace_back("general.file_type", gguf_u32(file_type));
  for (const auto& [k, v] : std::initializer_list<std::pair<const char*, int64_t>>{
           {"vocab_size", c.vocab_size}, {"context_length", c.max_position_embeddings},
           {"embedding_length", c.hidden_size}, {"block_count", c.num_layers},
           {"feed_forward_length", c.intermediate_size}, {"attention.head_count", c.num_heads},
           {"attention.head_count_kv", c.num_kv_heads}, {"attention.key_length", c.head_dim},
           {"attention.value_length", c.head_dim}, {"rope.dimension_count", c.head_dim}}) {
    md.emplace_back(std::string("llama.") + k, gguf_u32(v));
  }
  md.emplace_back("llama.rope.freq_base", gguf_f32(c.rope_theta));
  md.emplace_back("llama.attention.layer_norm_rms_epsilon", gguf_f32(c.rms_norm_eps));
  if (c.is_moe()) {
    md.emplace_back("llama.expert_count", gguf_u32(c.num_experts));
    md.emplace_back("llama.expert_used_count", gguf_u32(c.num_experts_per_tok));
  }
  md.emplace_back("tokenizer.ggml.bos_token_id", gguf_u32(c.bos_token_id));
  md.emplace_back("tokenizer.ggml.eos_token_id", gguf_u32(c.eos_token_id));
  return md;
}

// GGUF v3: header, metadata, tensor directory, data (each tensor aligned to 32 bytes).
// Experts are stacked [num_experts, rows, cols] per layer, as llama.cpp stores them.
Result<int64_t> write_gguf_model(const fs::path& path, const ModelConfig& c, const Target& tg, uint32_t file_type,
                                 const std::vector<LogicalTensor>& tensors, uint64_t seed,
                                 const std::function<void(int, int)>& progress) {
  constexpr int64_t kAlign = 32;
  Metadata md;
  if (c.architecture == "LlamaForCausalLM" || c.architecture == "MixtralForCausalLM") {
    md = llama_metadata(c, file_type);
  } else {
    DENSA_ASSIGN_OR_RETURN(md, gguf_model_metadata(c, file_type));
  }
  md.insert(md.begin() + 1, {"general.name", gguf_str("densa gen-model random weights")});
  md.emplace_back("general.alignment", gguf_u32(kAlign));
  if (tg.byte_vocab) {
    const ByteVocab v = byte_vocab(c);
    md.emplace_back("tokenizer.ggml.model", gguf_str("llama"));
    md.emplace_back("tokenizer.ggml.unknown_token_id", gguf_u32(0));
    GgufValue tokens;
    tokens.type = GgufType::kArray;
    tokens.elem_type = GgufType::kString;
    tokens.strings = v.pieces;
    md.emplace_back("tokenizer.ggml.tokens", std::move(tokens));
    GgufValue scores;
    scores.type = GgufType::kArray;
    scores.elem_type = GgufType::kF32;
    scores.reals.assign(v.scores.begin(), v.scores.end());
    md.emplace_back("tokenizer.ggml.scores", std::move(scores));
    GgufValue types;
    types.type = GgufType::kArray;
    types.elem_type = GgufType::kI32;
    types.integers.assign(v.types.begin(), v.types.end());
    md.emplace_back("tokenizer.ggml.token_type", std::move(types));
  }
  if (tg.tokenizer) {
    DENSA_RETURN_IF_ERROR(append_tokenizer_metadata(*tg.tokenizer, md));
    if (!tg.chat_template.empty()) md.emplace_back("tokenizer.chat_template", gguf_str(tg.chat_template));
  }

  // Directory: one entry per GGUF name (stacked experts share one); offsets per logical tensor.
  std::vector<GgufOutInfo> dir;
  std::vector<size_t> entry(tensors.size());
  std::vector<int64_t> slice(tensors.size(), 0);  // bytes into the entry
  for (size_t i = 0; i < tensors.size(); ++i) {
    const LogicalTensor& t = tensors[i];
    if (hf_only(t)) continue;
    const Part p = parts_of(tg, t)[0];
    if (t.expert_idx > 0) {  // a later expert of a stack already listed
      size_t first = i;
      while (tensors[first].expert_idx != 0 || tensors[first].gguf_name != t.gguf_name) --first;
      entry[i] = entry[first];
      slice[i] = t.expert_idx * p.nbytes;
      continue;
    }
    const int64_t count = t.expert_idx == 0 ? c.num_experts : 1;
    std::vector<int64_t> ne = t.gguf_ne.empty() ? std::vector<int64_t>(p.shape.rbegin(), p.shape.rend()) : t.gguf_ne;
    if (t.expert_idx == 0) ne.push_back(count);
    entry[i] = dir.size();
    dir.push_back({t.gguf_name, p.ggml_type, ne, static_cast<uint64_t>(count * p.nbytes)});
  }
  const GgufLayout layout = gguf_layout(md, dir, kAlign);
  const int64_t data_start = static_cast<int64_t>(layout.header.size());

  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out | std::ios::trunc);
  if (!f) return not_found(path.string() + ": cannot create");
  f.write(layout.header.data(), static_cast<std::streamsize>(layout.header.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!hf_only(tensors[i])) {
      const std::vector<float> values = logical_values(tensors[i], c, seed, tg.base);
      const int64_t at = data_start + static_cast<int64_t>(layout.offsets[entry[i]]) + slice[i];
      DENSA_RETURN_IF_ERROR(write_at(f, path, at, encode(tg, tensors[i], values)[0]));
    }
    if (progress) progress(static_cast<int>(i + 1), static_cast<int>(tensors.size()));
  }
  // Pad the last tensor to the alignment, as llama.cpp's writer does.
  f.seekp(0, std::ios::end);
  const int64_t end = f.tellp();
  const std::string zeros(static_cast<size_t>(align_up(end, kAlign) - end), '\0');
  f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  f.flush();
  if (!f) return data_loss(path.string() + ": write failed");
  return align_up(end, kAlign);
}

int element_bytes(const std::string& st_dtype) {
  if (st_dtype == "F32" || st_dtype == "I32") return 4;
  if (st_dtype == "F16" || st_dtype == "BF16") return 2;
  return 1;
}

// One safetensors file; tensors ordered by decreasing element size (each aligned to it).
Result<int64_t> write_safetensors_model(const fs::path& path, const Target& tg, const std::vector<LogicalTensor>& tensors,
                                        uint64_t seed, const std::function<void(int, int)>& progress) {
  struct Entry { size_t tensor; size_t part; Part p; };
  std::vector<Entry> entries;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (gguf_only(tensors[i])) continue;
    const std::vector<Part> parts = parts_of(tg, tensors[i]);
    for (size_t j = 0; j < parts.size(); ++j) entries.push_back({i, j, parts[j]});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return element_bytes(a.p.st_dtype) > element_bytes(b.p.st_dtype);
  });
  Json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<std::vector<int64_t>> where(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) where[i].resize(parts_of(tg, tensors[i]).size());
  int64_t offset = 0;
  for (const Entry& e : entries) {
    header[tensors[e.tensor].hf_name + e.p.suffix] = {
        {"dtype", e.p.st_dtype}, {"shape", e.p.shape}, {"data_offsets", {offset, offset + e.p.nbytes}}};
    where[e.tensor][e.part] = offset;
    offset += e.p.nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const int64_t data_start = 8 + static_cast<int64_t>(text.size());
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out | std::ios::trunc);
  if (!f) return not_found(path.string() + ": cannot create");
  const uint64_t n = text.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (gguf_only(tensors[i])) continue;
    const std::vector<float> values = tensor_values(tensors[i], seed, tg.base);
    const std::vector<std::vector<uint8_t>> bytes = encode(tg, tensors[i], values);
    for (size_t j = 0; j < bytes.size(); ++j) DENSA_RETURN_IF_ERROR(write_at(f, path, data_start + where[i][j], bytes[j]));
    if (progress) progress(static_cast<int>(i + 1), static_cast<int>(tensors.size()));
  }
  f.flush();
  if (!f) return data_loss(path.string() + ": write failed");
  return data_start + offset;
}

}  // namespace

Status apply_gen_model_preset(const std::string& preset, GenModelOptions& o) {
  if (preset == "dense-336m") {
    o.arch = "llama";
    o.num_experts = o.num_experts_per_tok = 0;
    o.intermediate_size = 2816;
  } else if (preset == "moe-959m-a336m") {
    o.arch = "mixtral";
    o.num_experts = 8;
    o.num_experts_per_tok = 2;
    o.intermediate_size = 1408;
  } else {
    return invalid_argument("--preset '" + preset + "': expected dense-336m or moe-959m-a336m");
  }
  o.hidden_size = 1024;
  o.num_layers = 24;
  o.num_heads = 16;
  o.num_kv_heads = 4;
  o.vocab_size = 32000;
  return Status::ok();
}

Result<ModelConfig> gen_model_config(const GenModelOptions& o) {
  ModelConfig c;
  const bool mixtral = o.arch == "mixtral", qwen3 = o.arch == "qwen3_moe", deepseek = o.arch == "deepseek_v3";
  if (o.arch != "llama" && !mixtral && !qwen3 && !deepseek) {
    return invalid_argument("--arch '" + o.arch + "': expected llama, mixtral, qwen3_moe or deepseek_v3");
  }
  for (const auto& [name, v] : {std::pair<const char*, int>{"--hidden", o.hidden_size}, {"--layers", o.num_layers},
                                {"--heads", o.num_heads}, {"--ffn", o.intermediate_size},
                                {"--vocab", o.vocab_size}, {"--max-context", o.max_context}}) {
    if (v <= 0) return invalid_argument(std::string(name) + " must be positive (got " + std::to_string(v) + ")");
  }
  const bool moe = mixtral || qwen3 || deepseek;
  if (moe) {
    if (o.num_experts < 1 || o.num_experts_per_tok < 1 || o.num_experts_per_tok > o.num_experts) {
      return invalid_argument(o.arch + " needs --experts E >= 1 and 1 <= --top-k <= E");
    }
  } else if (o.num_experts != 0) {
    return invalid_argument("--experts is for --arch mixtral, qwen3_moe or deepseek_v3");
  }
  if (o.moe_intermediate_size < 0) return invalid_argument("--moe-ffn must be positive (or 0: --ffn)");
  c.vocab_size = o.vocab_size;
  c.hidden_size = o.hidden_size;
  c.num_layers = o.num_layers;
  c.num_heads = o.num_heads;
  c.intermediate_size = o.intermediate_size;
  c.num_experts = moe ? o.num_experts : 0;
  c.num_experts_per_tok = moe ? o.num_experts_per_tok : 0;
  c.moe_intermediate_size = mixtral ? o.intermediate_size : moe ? (o.moe_intermediate_size > 0 ? o.moe_intermediate_size : o.intermediate_size) : 0;
  c.max_position_embeddings = o.max_context;
  if (deepseek) {
    c.architecture = "DeepseekV3ForCausalLM";
    MlaConfig& m = c.mla;
    const int base = o.hidden_size / o.num_heads;
    m.q_lora_rank = o.q_lora_rank < 0 ? o.hidden_size / 2 : o.q_lora_rank;
    m.kv_lora_rank = o.kv_lora_rank > 0 ? o.kv_lora_rank : o.hidden_size / 4;
    m.qk_nope_head_dim = o.qk_nope_head_dim > 0 ? o.qk_nope_head_dim : base;
    m.qk_rope_head_dim = o.qk_rope_head_dim > 0 ? o.qk_rope_head_dim : m.qk_nope_head_dim / 2;
    m.v_head_dim = o.v_head_dim > 0 ? o.v_head_dim : m.qk_nope_head_dim;
    m.rope_interleave = true;
    if (m.kv_lora_rank <= 0 || m.qk_nope_head_dim <= 0 || m.qk_rope_head_dim <= 0 || m.qk_rope_head_dim % 2 != 0 ||
        m.v_head_dim <= 0) {
      return invalid_argument("deepseek_v3 needs positive --kv-lora-rank, --qk-nope-dim, --v-head-dim and an even "
                              "--qk-rope-dim (got " + std::to_string(m.kv_lora_rank) + ", " +
                              std::to_string(m.qk_nope_head_dim) + ", " + std::to_string(m.v_head_dim) + ", " +
                              std::to_string(m.qk_rope_head_dim) + ")");
    }
    c.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
    c.num_kv_heads = c.num_heads;
    c.rms_norm_eps = 1e-6f;
    c.moe_routing = MoeRouting::kSigmoidGrouped;
    c.norm_topk_prob = true;
    c.routed_scaling_factor = static_cast<float>(o.routed_scaling_factor);
    c.first_k_dense_replace = o.first_k_dense_replace;
    c.n_group = o.n_group;
    c.topk_group = o.topk_group;
    if (o.num_shared_experts < 0) return invalid_argument("--shared-experts must be >= 0");
    c.shared_expert_intermediate_size = o.num_shared_experts * c.moe_intermediate_size;
    if (o.first_k_dense_replace < 0 || o.first_k_dense_replace > o.num_layers) {
      return invalid_argument("--dense-layers must be within 0..--layers");
    }
    const int group_size = c.n_group > 0 ? c.num_experts / c.n_group : 0;
    if (c.n_group <= 0 || c.num_experts % c.n_group != 0 || group_size < 2 || c.topk_group <= 0 ||
        c.topk_group > c.n_group || c.topk_group * group_size < c.num_experts_per_tok) {
      return invalid_argument("--expert-groups " + std::to_string(c.n_group) + " / --topk-groups " +
                              std::to_string(c.topk_group) + " do not fit " + std::to_string(c.num_experts) +
                              " experts with top-" + std::to_string(c.num_experts_per_tok) +
                              " (groups of at least 2 experts; the kept groups must hold top-k)");
    }
    if (!(o.routed_scaling_factor > 0)) return invalid_argument("--routed-scale must be positive");
    return c;
  }
  if (o.num_kv_heads <= 0) return invalid_argument("--kv-heads must be positive (got " + std::to_string(o.num_kv_heads) + ")");
  c.head_dim = o.head_dim > 0 ? o.head_dim : o.hidden_size / o.num_heads;
  if ((o.head_dim <= 0 && o.hidden_size % o.num_heads != 0) || c.head_dim % 2 != 0) {
    return invalid_argument("--hidden " + std::to_string(o.hidden_size) + " must be a multiple of --heads " +
                            std::to_string(o.num_heads) + " with an even head dim (or give an even --head-dim)");
  }
  if (o.num_heads % o.num_kv_heads != 0) return invalid_argument("--heads must be a multiple of --kv-heads");
  c.num_kv_heads = o.num_kv_heads;
  if (qwen3) {
    c.architecture = "Qwen3MoeForCausalLM";
    c.qk_norm = true;
    c.norm_topk_prob = true;
    c.rope_theta = 1e6f;
    c.rms_norm_eps = 1e-6f;
  } else {
    c.architecture = mixtral ? "MixtralForCausalLM" : "LlamaForCausalLM";
  }
  return c;
}

// Every tensor of the HF form counts (deepseek2's split kv_b is the same parameters again).
int64_t count_total_params(const ModelConfig& c) {
  int64_t n = 0;
  for (const LogicalTensor& t : model_tensors(c)) {
    if (!gguf_only(t)) n += t.rows * t.cols;
  }
  return n;
}

int64_t count_active_params(const ModelConfig& c) {
  if (!c.is_moe()) return count_total_params(c);
  int64_t unused = 0;  // of each MoE layer's routed experts, all but top_k
  for (const LogicalTensor& t : model_tensors(c)) {
    if (t.expert_idx >= c.num_experts_per_tok) unused += t.rows * t.cols;
  }
  return count_total_params(c) - unused;
}

Result<GenModelReport> generate_model(const GenModelOptions& options, const std::function<void(int, int)>& progress) {
  GenModelOptions opts = options;
  std::optional<TokenizerDirInfo> tokenizer_dir;
  std::optional<LoadedTokenizer> gguf_tokenizer;
  if (opts.tokenizer != "none" && opts.tokenizer != "bytes") {
    DENSA_ASSIGN_OR_RETURN(tokenizer_dir, inspect_tokenizer_dir(opts.tokenizer));
    opts.vocab_size = tokenizer_dir->vocab_size;
    if (opts.format == "gguf") {
      DENSA_ASSIGN_OR_RETURN(gguf_tokenizer, load_tokenizer(opts.tokenizer));
      if (gguf_tokenizer->tokenizer.vocab_size() != opts.vocab_size) {
        return invalid_argument(opts.tokenizer + ": the tokenizer holds " +
                                std::to_string(gguf_tokenizer->tokenizer.vocab_size()) + " tokens, its files say " +
                                std::to_string(opts.vocab_size));
      }
    }
  }
  DENSA_ASSIGN_OR_RETURN(ModelConfig c, gen_model_config(opts));
  if (tokenizer_dir) {
    // A model without a BOS token (Qwen3) starts prompts with no BOS; config.json still
    // needs an id, and the tokenizer files decide whether one is added.
    c.eos_token_id = tokenizer_dir->eos_id.value_or(c.eos_token_id);
    c.bos_token_id = tokenizer_dir->bos_id.value_or(c.eos_token_id);
  }
  Target tg;
  tg.gguf = opts.format == "gguf";
  if (!tg.gguf && opts.format != "hf") return invalid_argument("--format '" + opts.format + "': expected gguf or hf");
  tg.group_size = opts.group_size;
  if (gguf_tokenizer) {
    tg.tokenizer = &gguf_tokenizer->tokenizer;
    tg.chat_template = gguf_tokenizer->assets.chat_template;
  }
  const std::string& d = opts.dtype;
  uint32_t file_type = 0;  // GGUF general.file_type (llama_ftype)
  if (d == "f32") { tg.base = BaseType::kF32; tg.matrix = DType::kF32; file_type = 0; }
  else if (d == "f16") { tg.base = BaseType::kF16; tg.matrix = DType::kF16; file_type = 1; }
  else if (d == "bf16") { tg.matrix = DType::kBF16; file_type = 32; }
  else if (d == "q8_0") { tg.matrix = DType::kQ8_0; file_type = 7; }
  else if (d == "q4_0") { tg.matrix = DType::kQ4_0; file_type = 2; }
  else if (d == "fp8") { tg.matrix = DType::kFP8E4M3; }
  else if (d == "int4") { tg.matrix = DType::kI4; }
  else return invalid_argument("--dtype '" + d + "': expected f32, f16, bf16, fp8, int4, q8_0 or q4_0");
  if (tg.gguf && (d == "fp8" || d == "int4")) {
    return invalid_argument("--dtype " + d + " is a Hugging Face format: use --format hf");
  }
  if (!tg.gguf && (d == "q8_0" || d == "q4_0")) {
    return invalid_argument("--dtype " + d + " is a GGUF format: use --format gguf");
  }
  if (opts.tokenizer == "bytes") {
    if (!tg.gguf) return invalid_argument("--tokenizer bytes is written into GGUF files only: use --format gguf");
    if (c.vocab_size < 260) {
      return invalid_argument("--tokenizer bytes needs --vocab >= 260 (<unk>, <s>, </s>, 256 byte tokens and the space piece), got " +
                              std::to_string(c.vocab_size));
    }
    if (c.bos_token_id != 1 || c.eos_token_id != 2) return invalid_argument("--tokenizer bytes expects BOS 1 and EOS 2");
    tg.byte_vocab = true;
  }
  if (const std::string& h = opts.lm_head_dtype; !h.empty()) {
    const std::optional<DType> head = dtype_from_name(h);
    const bool float_head = head == DType::kF32 || head == DType::kF16 || head == DType::kBF16;
    const bool ok = tg.gguf ? (float_head || head == DType::kQ8_0 || head == DType::kQ4_0)
                            : (float_head || head == tg.matrix);
    if (!head || !ok) {
      return invalid_argument("--lm-head-dtype '" + h + "': " +
                              (tg.gguf ? std::string("a GGUF lm_head is f32, f16, bf16, q8_0 or q4_0")
                                       : "a Hugging Face lm_head is f32, f16, bf16 or the --dtype format (" + d +
                                             "; one quantization_config covers the file)"));
    }
    tg.head = head;
  }
  const std::vector<LogicalTensor> tensors = model_tensors(c);
  for (const LogicalTensor& t : tensors) {
    if (tg.gguf ? hf_only(t) : gguf_only(t)) continue;
    const DType sd = stored_dtype(tg, t);
    if (sd == DType::kF32 || sd == DType::kF16 || sd == DType::kBF16) continue;
    if (Status s = check_quant_target(WeightQuantSpec{sd, tg.group_size}, t.rows, t.cols); !s.is_ok()) {
      return invalid_argument("tensor '" + t.hf_name + "' [" + std::to_string(t.rows) + ", " + std::to_string(t.cols) +
                              "] cannot be stored as " + d + ": " + s.message());
    }
  }
  GenModelReport report;
  report.config = c;
  report.total_params = count_total_params(c);
  report.active_params = count_active_params(c);
  std::error_code ec;
  if (tg.gguf) {
    if (opts.output.has_parent_path()) fs::create_directories(opts.output.parent_path(), ec);
    DENSA_ASSIGN_OR_RETURN(report.bytes_written, write_gguf_model(opts.output, c, tg, file_type, tensors, opts.seed, progress));
    return report;
  }
  fs::create_directories(opts.output, ec);
  if (ec) return not_found(opts.output.string() + ": cannot create directory: " + ec.message());
  std::ofstream cfg(opts.output / "config.json", std::ios::binary | std::ios::trunc);
  cfg << config_json(c, tg, d).dump(2) << "\n";
  cfg.close();
  if (!cfg) return data_loss((opts.output / "config.json").string() + ": write failed");
  DENSA_ASSIGN_OR_RETURN(report.bytes_written,
                         write_safetensors_model(opts.output / "model.safetensors", tg, tensors, opts.seed, progress));
  if (tokenizer_dir) DENSA_RETURN_IF_ERROR(copy_tokenizer_files(*tokenizer_dir, opts.output));
  return report;
}

}  // namespace densa
