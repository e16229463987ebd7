#include "tools/gen_model.h"
#include "tools/gen_model_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/gguf_file.h"
#include "quant/fp8_block.h"
#include "quant/quantize_matrix.h"

namespace densa {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// ---- the tensors of a model, independent of the file format ----

enum class Role { kMatrix, kEmbedding, kHead, kRouter, kNorm };

// One logical tensor (Hugging Face naming; a norm is rows = 1).
struct LogicalTensor {
  std::string hf_name;   // without ".weight"
  std::string gguf_name; // with ".weight"; stacked experts share it
  int64_t rows = 0, cols = 0;
  Role role = Role::kMatrix;
  int expert_idx = -1;       // >= 0: slice expert_idx of a GGUF stacked tensor
  int gguf_permute_heads = 0;  // Q/K: heads whose rows GGUF interleaves
  int head_dim = 0;
};

std::vector<LogicalTensor> model_tensors(const ModelConfig& c) {
  std::vector<LogicalTensor> t;
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t f = c.intermediate_size;
  t.push_back({"model.embed_tokens", "token_embd.weight", c.vocab_size, h, Role::kEmbedding});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".", g = "blk." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm", g + "attn_norm.weight", 1, h, Role::kNorm});
    t.push_back({p + "self_attn.q_proj", g + "attn_q.weight", q, h, Role::kMatrix, -1, c.num_heads, c.head_dim});
    t.push_back({p + "self_attn.k_proj", g + "attn_k.weight", kv, h, Role::kMatrix, -1, c.num_kv_heads, c.head_dim});
    t.push_back({p + "self_attn.v_proj", g + "attn_v.weight", kv, h, Role::kMatrix});
    t.push_back({p + "self_attn.o_proj", g + "attn_output.weight", h, q, Role::kMatrix});
    t.push_back({p + "post_attention_layernorm", g + "ffn_norm.weight", 1, h, Role::kNorm});
    if (!c.is_moe()) {
      t.push_back({p + "mlp.gate_proj", g + "ffn_gate.weight", f, h, Role::kMatrix});
      t.push_back({p + "mlp.up_proj", g + "ffn_up.weight", f, h, Role::kMatrix});
      t.push_back({p + "mlp.down_proj", g + "ffn_down.weight", h, f, Role::kMatrix});
      continue;
    }
    t.push_back({p + "block_sparse_moe.gate", g + "ffn_gate_inp.weight", c.num_experts, h, Role::kRouter});
    for (int e = 0; e < c.num_experts; ++e) {
      const std::string x = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
      t.push_back({x + "w1", g + "ffn_gate_exps.weight", f, h, Role::kMatrix, e});
      t.push_back({x + "w3", g + "ffn_up_exps.weight", f, h, Role::kMatrix, e});
      t.push_back({x + "w2", g + "ffn_down_exps.weight", h, f, Role::kMatrix, e});
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
  const double stddev = t.role == Role::kEmbedding ? 1.0 : 1.0 / std::sqrt(static_cast<double>(t.cols));
  const float a = static_cast<float>(stddev * std::sqrt(3.0));  // uniform(-a, a) has this stddev
  uint64_t s = seed ^ name_hash(t.hf_name);
  for (float& x : v) {
    const float u = static_cast<float>(splitmix64(s) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    x = round_to(base, (2.0f * u - 1.0f) * a);
  }
  return v;
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
};

const char* st_name_of(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kFP8E4M3: return "F8_E4M3";
    case DType::kI32: return "I32";
    case DType::kQ8_0: case DType::kQ4_0: case DType::kI4: case DType::kI8: case DType::kU8: break;
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
    case Role::kMatrix: return tg.matrix;
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
  return t.role == Role::kNorm ? std::vector<int64_t>{t.cols} : std::vector<int64_t>{t.rows, t.cols};
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
      return {Part{".weight", st_name_of(d), 0, st_shape(t), t.rows * t.cols * static_cast<int64_t>(d == DType::kF32 ? 4 : 2)}};
    case DType::kQ8_0: case DType::kQ4_0: case DType::kI8: case DType::kI32: case DType::kU8: break;
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
    case DType::kI8: case DType::kI32: case DType::kU8: break;
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

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_str(std::string& s, const std::string& v) {
  put<uint64_t>(s, v.size());
  s += v;
}
int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

Status write_at(std::fstream& f, const fs::path& path, int64_t offset, const std::vector<uint8_t>& bytes) {
  f.seekp(offset);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) return data_loss(path.string() + ": write failed at offset " + std::to_string(offset));
  return Status::ok();
}

Json config_json(const ModelConfig& c, const Target& tg, const std::string& dtype) {
  Json j;
  j["architectures"] = {c.architecture};
  j["model_type"] = c.is_moe() ? "mixtral" : "llama";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["tie_word_embeddings"] = false;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  if (c.is_moe()) {
    j["num_local_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
  }
  j["torch_dtype"] = tg.base == BaseType::kF32 ? "float32" : tg.base == BaseType::kF16 ? "float16" : "bfloat16";
  if (dtype == "fp8") {
    j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                {"weight_block_size", {kFp8BlockRows, kFp8BlockCols}}};
  } else if (dtype == "int4") {
    Json w = {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"},
              {"group_size", tg.group_size}, {"dynamic", false}, {"actorder", nullptr}, {"observer", "minmax"}};
    const bool head_int4 = tg.head == DType::kI4;  // then "Linear" covers lm_head too
    j["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"},
                                {"quantization_status", "compressed"},
                                {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}}}}},
                                {"ignore", head_int4 ? Json{"re:.*block_sparse_moe.gate$"}
                                                     : Json{"lm_head", "re:.*block_sparse_moe.gate$"}}};
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

// GGUF v3: header, metadata, tensor directory, data (each tensor aligned to 32 bytes).
// Experts are stacked [num_experts, rows, cols] per layer, as llama.cpp stores them.
Result<int64_t> write_gguf_model(const fs::path& path, const ModelConfig& c, const Target& tg, uint32_t file_type,
                                 const std::vector<LogicalTensor>& tensors, uint64_t seed,
                                 const std::function<void(int, int)>& progress) {
  constexpr int64_t kAlign = 32;
  std::string head;
  int num_kv = 0;
  std::string kv;
  auto key = [&](const std::string& k, GgufType type) {
    put_str(kv, k);
    put<uint32_t>(kv, static_cast<uint32_t>(type));
    ++num_kv;
  };
  auto u32 = [&](const std::string& k, int64_t v) { key(k, GgufType::kU32); put<uint32_t>(kv, static_cast<uint32_t>(v)); };
  auto f32 = [&](const std::string& k, double v) { key(k, GgufType::kF32); put<float>(kv, static_cast<float>(v)); };
  auto str = [&](const std::string& k, const std::string& v) { key(k, GgufType::kString); put_str(kv, v); };
  str("general.architecture", "llama");
  str("general.name", "densa gen-model random weights");
  u32("general.file_type", file_type);
  u32("general.alignment", kAlign);
  u32("llama.vocab_size", c.vocab_size);
  u32("llama.context_length", c.max_position_embeddings);
  u32("llama.embedding_length", c.hidden_size);
  u32("llama.block_count", c.num_layers);
  u32("llama.feed_forward_length", c.intermediate_size);
  u32("llama.attention.head_count", c.num_heads);
  u32("llama.attention.head_count_kv", c.num_kv_heads);
  u32("llama.attention.key_length", c.head_dim);
  u32("llama.attention.value_length", c.head_dim);
  u32("llama.rope.dimension_count", c.head_dim);
  f32("llama.rope.freq_base", c.rope_theta);
  f32("llama.attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  if (c.is_moe()) {
    u32("llama.expert_count", c.num_experts);
    u32("llama.expert_used_count", c.num_experts_per_tok);
  }
  u32("tokenizer.ggml.bos_token_id", c.bos_token_id);
  u32("tokenizer.ggml.eos_token_id", c.eos_token_id);
  if (tg.byte_vocab) {
    const ByteVocab v = byte_vocab(c);
    str("tokenizer.ggml.model", "llama");
    u32("tokenizer.ggml.unknown_token_id", 0);
    const uint64_t n = v.pieces.size();
    key("tokenizer.ggml.tokens", GgufType::kArray);
    put<uint32_t>(kv, static_cast<uint32_t>(GgufType::kString));
    put<uint64_t>(kv, n);
    for (const std::string& p : v.pieces) put_str(kv, p);
    key("tokenizer.ggml.scores", GgufType::kArray);
    put<uint32_t>(kv, static_cast<uint32_t>(GgufType::kF32));
    put<uint64_t>(kv, n);
    for (float x : v.scores) put<float>(kv, x);
    key("tokenizer.ggml.token_type", GgufType::kArray);
    put<uint32_t>(kv, static_cast<uint32_t>(GgufType::kI32));
    put<uint64_t>(kv, n);
    for (int32_t t : v.types) put<int32_t>(kv, t);
  }

  // Directory: one entry per GGUF name (stacked experts share one); offsets per logical tensor.
  std::string dir;
  int num_gguf = 0;
  int64_t offset = 0;
  std::vector<int64_t> where(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const LogicalTensor& t = tensors[i];
    const Part p = parts_of(tg, t)[0];
    if (t.expert_idx > 0) {  // a later expert of a stack already listed
      size_t first = i;
      while (tensors[first].expert_idx != 0 || tensors[first].gguf_name != t.gguf_name) --first;
      where[i] = where[first] + t.expert_idx * p.nbytes;
      continue;
    }
    const int64_t count = t.expert_idx == 0 ? c.num_experts : 1;
    std::vector<int64_t> ne(p.shape.rbegin(), p.shape.rend());
    if (t.expert_idx == 0) ne.push_back(count);
    put_str(dir, t.gguf_name);
    put<uint32_t>(dir, static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) put<uint64_t>(dir, static_cast<uint64_t>(d));
    put<uint32_t>(dir, p.ggml_type);
    put<uint64_t>(dir, static_cast<uint64_t>(offset));
    where[i] = offset;
    offset = align_up(offset + count * p.nbytes, kAlign);
    ++num_gguf;
  }
  put<uint32_t>(head, 0x46554747u);  // "GGUF"
  put<uint32_t>(head, 3);
  put<uint64_t>(head, static_cast<uint64_t>(num_gguf));
  put<uint64_t>(head, static_cast<uint64_t>(num_kv));
  head += kv;
  head += dir;
  head.append(static_cast<size_t>(align_up(static_cast<int64_t>(head.size()), kAlign)) - head.size(), '\0');
  const int64_t data_start = static_cast<int64_t>(head.size());

  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out | std::ios::trunc);
  if (!f) return not_found(path.string() + ": cannot create");
  f.write(head.data(), static_cast<std::streamsize>(head.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::vector<float> values = tensor_values(tensors[i], seed, tg.base);
    DENSA_RETURN_IF_ERROR(write_at(f, path, data_start + where[i], encode(tg, tensors[i], values)[0]));
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
  if (o.arch != "llama" && o.arch != "mixtral") return invalid_argument("--arch '" + o.arch + "': expected llama or mixtral");
  for (const auto& [name, v] : {std::pair<const char*, int>{"--hidden", o.hidden_size}, {"--layers", o.num_layers},
                                {"--heads", o.num_heads}, {"--kv-heads", o.num_kv_heads}, {"--ffn", o.intermediate_size},
                                {"--vocab", o.vocab_size}, {"--max-context", o.max_context}}) {
    if (v <= 0) return invalid_argument(std::string(name) + " must be positive (got " + std::to_string(v) + ")");
  }
  if (o.hidden_size % o.num_heads != 0 || (o.hidden_size / o.num_heads) % 2 != 0) {
    return invalid_argument("--hidden " + std::to_string(o.hidden_size) + " must be a multiple of --heads " +
                            std::to_string(o.num_heads) + " with an even head dim");
  }
  if (o.num_heads % o.num_kv_heads != 0) return invalid_argument("--heads must be a multiple of --kv-heads");
  if (o.arch == "mixtral") {
    if (o.num_experts < 1 || o.num_experts_per_tok < 1 || o.num_experts_per_tok > o.num_experts) {
      return invalid_argument("mixtral needs --experts E >= 1 and 1 <= --top-k <= E");
    }
  } else if (o.num_experts != 0) {
    return invalid_argument("--experts is for --arch mixtral");
  }
  c.architecture = o.arch == "mixtral" ? "MixtralForCausalLM" : "LlamaForCausalLM";
  c.vocab_size = o.vocab_size;
  c.hidden_size = o.hidden_size;
  c.num_layers = o.num_layers;
  c.num_heads = o.num_heads;
  c.num_kv_heads = o.num_kv_heads;
  c.head_dim = o.hidden_size / o.num_heads;
  c.intermediate_size = o.intermediate_size;
  c.num_experts = o.arch == "mixtral" ? o.num_experts : 0;
  c.num_experts_per_tok = o.arch == "mixtral" ? o.num_experts_per_tok : 0;
  c.max_position_embeddings = o.max_context;
  return c;
}

int64_t count_total_params(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t attn = 2 * h * q + 2 * h * kv, ffn = 3 * h * c.intermediate_size;
  const int64_t per_layer = attn + 2 * h + (c.is_moe() ? c.num_experts * ffn + c.num_experts * h : ffn);
  return 2 * int64_t{c.vocab_size} * h + h + c.num_layers * per_layer;
}

int64_t count_active_params(const ModelConfig& c) {
  if (!c.is_moe()) return count_total_params(c);
  const int64_t unused = int64_t{c.num_experts - c.num_experts_per_tok} * 3 * c.hidden_size * c.intermediate_size;
  return count_total_params(c) - c.num_layers * unused;
}

Result<GenModelReport> generate_model(const GenModelOptions& options, const std::function<void(int, int)>& progress) {
  GenModelOptions opts = options;
  std::optional<TokenizerDirInfo> tokenizer_dir;
  if (opts.tokenizer != "none" && opts.tokenizer != "bytes") {
    if (opts.format != "hf") return invalid_argument("--tokenizer DIR is copied into Hugging Face checkpoints: use --format hf");
    DENSA_ASSIGN_OR_RETURN(tokenizer_dir, inspect_tokenizer_dir(opts.tokenizer));
    opts.vocab_size = tokenizer_dir->vocab_size;
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
