#include "tools/model_files/gen_model.h"
#include "tools/model_files/gen_model_tensors.h"
#include "tools/model_files/gen_model_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "io/safetensors_writer.h"
#include "model/gguf_config.h"
#include "quant/fp8_block.h"
#include "quant/quantize_matrix.h"
#include "text/tokenizer_loader.h"
#include "tools/model_files/gguf_model_writer.h"

namespace densa {
namespace {

using namespace gen_model_internal;

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

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

// One safetensors file (io/safetensors_writer.h's layout), each tensor encoded and written at
// its offset as it is generated.
Result<int64_t> write_safetensors_model(const fs::path& path, const Target& tg, const std::vector<LogicalTensor>& tensors,
                                        uint64_t seed, const std::function<void(int, int)>& progress) {
  std::vector<SafetensorsOutInfo> infos;
  std::vector<std::vector<size_t>> info_of(tensors.size());  // [tensor][part] -> infos index
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (gguf_only(tensors[i])) continue;
    for (const Part& p : parts_of(tg, tensors[i])) {
      info_of[i].push_back(infos.size());
      infos.push_back({tensors[i].hf_name + p.suffix, p.st_dtype, p.shape, static_cast<uint64_t>(p.nbytes)});
    }
  }
  const SafetensorsLayout layout = safetensors_layout(infos);
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out | std::ios::trunc);
  if (!f) return not_found(path.string() + ": cannot create");
  f.write(layout.head.data(), static_cast<std::streamsize>(layout.head.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (gguf_only(tensors[i])) continue;
    const std::vector<float> values = tensor_values(tensors[i], seed, tg.base);
    const std::vector<std::vector<uint8_t>> bytes = encode(tg, tensors[i], values);
    for (size_t j = 0; j < bytes.size(); ++j) {
      DENSA_RETURN_IF_ERROR(write_at(f, path, static_cast<int64_t>(layout.offsets[info_of[i][j]]), bytes[j]));
    }
    if (progress) progress(static_cast<int>(i + 1), static_cast<int>(tensors.size()));
  }
  f.flush();
  if (!f) return data_loss(path.string() + ": write failed");
  return static_cast<int64_t>(layout.file_bytes);
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
