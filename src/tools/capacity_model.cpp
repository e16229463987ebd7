#include "tools/capacity_model.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/gguf_file.h"

namespace densa {
namespace {

using nlohmann::json;

std::optional<int64_t> get_int(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

bool get_bool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string get_string(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Collects weight groups; matrices are [rows = out, cols = in]. Groups added while `nextn` is
// set belong to the NextN / MTP layers.
struct WeightList {
  std::vector<WeightGroup> groups;
  bool nextn = false;
  WeightGroup& add(WeightGroup g) {
    g.nextn = nextn;
    groups.push_back(std::move(g));
    return groups.back();
  }
  void matrix(std::string name, int64_t rows, int64_t cols, int64_t count = 1,
              WeightShard shard = WeightShard::kReplicated, int64_t heads = 0) {
    if (rows > 0 && cols > 0 && count > 0) add({std::move(name), rows, cols, count, true, shard, heads});
  }
  void vector(std::string name, int64_t size, int64_t count = 1) {
    if (size > 0 && count > 0) add({std::move(name), 1, size, count, false});
  }
  void embedding(std::string name, int64_t rows, int64_t cols) {
    add({std::move(name), rows, cols, 1, false, WeightShard::kTpRows});
  }
};

}  // namespace

int64_t CapacityModel::num_params() const {
  int64_t n = 0;
  for (const WeightGroup& g : weights) n += g.nextn ? 0 : g.num_params();
  return n;
}

Result<CapacityModel> capacity_model_from_hf_config(const std::string& json_text,
                                                    const std::string& origin) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return invalid_argument(origin + ": not a JSON object");
  // Multimodal wrappers keep the language model under text_config.
  const json& c = root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;

  auto require = [&](const char* key) -> Result<int64_t> {
    std::optional<int64_t> v = get_int(c, key);
    if (!v || *v <= 0) return invalid_argument(origin + ": missing or invalid \"" + key + "\"");
    return *v;
  };

  CapacityModel m;
  m.source = origin;
  if (auto it = root.find("architectures"); it != root.end() && it->is_array() && !it->empty() &&
                                            (*it)[0].is_string()) {
    m.architecture = (*it)[0].get<std::string>();
  } else {
    m.architecture = get_string(c, "model_type");
  }
  const std::string model_type = get_string(c, "model_type");

  DENSA_ASSIGN_OR_RETURN(const int64_t hidden, require("hidden_size"));
  DENSA_ASSIGN_OR_RETURN(const int64_t num_layers, require("num_hidden_layers"));
  DENSA_ASSIGN_OR_RETURN(const int64_t num_heads, require("num_attention_heads"));
  DENSA_ASSIGN_OR_RETURN(const int64_t vocab, require("vocab_size"));
  m.num_layers = num_layers;
  m.max_position_embeddings = get_int(c, "max_position_embeddings").value_or(0);

  WeightList w;
  w.embedding("embed_tokens", vocab, hidden);
  if (!get_bool(root, "tie_word_embeddings", get_bool(c, "tie_word_embeddings", false))) {
    w.embedding("lm_head", vocab, hidden);
  }
  w.vector("norm", hidden);
  // Decoder layers [first, first + n): attention and FFN.
  auto add_layers = [&](int64_t first, int64_t n) -> Status {
    w.vector("layer_norms", 2 * hidden, n);

    // ---- attention ----
    const std::optional<int64_t> kv_lora_rank = get_int(c, "kv_lora_rank");
    if (kv_lora_rank && *kv_lora_rank > 0) {
      m.attention = KvAttention::kMla;
      m.kv_lora_rank = *kv_lora_rank;
      DENSA_ASSIGN_OR_RETURN(m.qk_rope_head_dim, require("qk_rope_head_dim"));
      DENSA_ASSIGN_OR_RETURN(const int64_t nope, require("qk_nope_head_dim"));
      DENSA_ASSIGN_OR_RETURN(const int64_t v_dim, require("v_head_dim"));
      const int64_t q_lora = get_int(c, "q_lora_rank").value_or(0);
      const int64_t q_dim = num_heads * (nope + m.qk_rope_head_dim);
      if (q_lora > 0) {
        w.matrix("attn.q_a", q_lora, hidden, n);
        w.vector("attn.q_a_norm", q_lora, n);
        w.matrix("attn.q_b", q_dim, q_lora, n, WeightShard::kTpRows, num_heads);
      } else {
        w.matrix("attn.q", q_dim, hidden, n, WeightShard::kTpRows, num_heads);
      }
      w.matrix("attn.kv_a", m.kv_lora_rank + m.qk_rope_head_dim, hidden, n);
      w.vector("attn.kv_a_norm", m.kv_lora_rank, n);
      w.matrix("attn.kv_b", num_heads * (nope + v_dim), m.kv_lora_rank, n, WeightShard::kTpRows, num_heads);
      w.matrix("attn.o", hidden, num_heads * v_dim, n, WeightShard::kTpCols, num_heads);
    } else {
      m.attention = KvAttention::kGqa;
      m.num_kv_heads = get_int(c, "num_key_value_heads").value_or(num_heads);
      m.head_dim = get_int(c, "head_dim").value_or(hidden / num_heads);
      if (m.num_kv_heads <= 0 || m.head_dim <= 0) return invalid_argument(origin + ": invalid KV head shape");
      const int64_t q_dim = num_heads * m.head_dim;
      const int64_t kv_dim = m.num_kv_heads * m.head_dim;
      w.matrix("attn.q", q_dim, hidden, n, WeightShard::kTpRows, num_heads);
      w.matrix("attn.k", kv_dim, hidden, n, WeightShard::kTpRows, m.num_kv_heads);
      w.matrix("attn.v", kv_dim, hidden, n, WeightShard::kTpRows, m.num_kv_heads);
      w.matrix("attn.o", hidden, q_dim, n, WeightShard::kTpCols, num_heads);
      if (get_bool(c, "attention_bias", model_type == "qwen2_moe" || model_type == "qwen2")) {
        w.vector("attn.qkv_bias", q_dim + 2 * kv_dim, n);
      }
      if (get_bool(c, "use_qk_norm", model_type == "qwen3_moe" || model_type == "qwen3")) {
        w.vector("attn.qk_norm", 2 * m.head_dim, n);
      }
    }

    // ---- feed-forward: dense layers and MoE layers ----
    const int64_t num_experts = get_int(c, "n_routed_experts")
                                    .value_or(get_int(c, "num_local_experts")
                                                  .value_or(get_int(c, "num_experts").value_or(0)));
    const int64_t dense_width = get_int(c, "intermediate_size").value_or(0);
    int64_t num_moe_layers = 0;
    if (num_experts > 0) {
      const int64_t first_dense = get_int(c, "first_k_dense_replace").value_or(0);
      const int64_t layer_freq = std::max<int64_t>(1, get_int(c, "moe_layer_freq").value_or(1));
      const int64_t sparse_step = std::max<int64_t>(1, get_int(c, "decoder_sparse_step").value_or(1));
      std::vector<int64_t> mlp_only;
      if (auto it = c.find("mlp_only_layers"); it != c.end() && it->is_array()) {
        for (const json& v : *it) {
          if (v.is_number_integer()) mlp_only.push_back(v.get<int64_t>());
        }
      }
      for (int64_t i = first; i < first + n; ++i) {
        bool dense_here = i < first_dense || i % layer_freq != 0 || (i + 1) % sparse_step != 0 ||
                          std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
        if (auto t = c.find("mlp_layer_types"); t != c.end() && t->is_array() && i < static_cast<int64_t>(t->size())) {
          dense_here = (*t)[static_cast<size_t>(i)] == "dense";  // GLM-4.7-Flash / GLM-5 form
        }
        if (!dense_here) ++num_moe_layers;
      }
    }
    const int64_t num_dense_layers = n - num_moe_layers;
    if (num_dense_layers > 0) {
      if (dense_width <= 0) return invalid_argument(origin + ": missing or invalid \"intermediate_size\"");
      w.matrix("mlp.gate_up", dense_width, hidden, 2 * num_dense_layers, WeightShard::kTpRows);
      w.matrix("mlp.down", hidden, dense_width, num_dense_layers, WeightShard::kTpCols);
    }
    if (num_moe_layers > 0) {
      const int64_t expert_width = get_int(c, "moe_intermediate_size").value_or(dense_width);
      if (expert_width <= 0) return invalid_argument(origin + ": missing or invalid \"moe_intermediate_size\"");
      w.matrix("moe.router", num_experts, hidden, num_moe_layers);
      w.groups.back().quantizable = false;
      if (get_string(c, "topk_method") == "noaux_tc" || model_type == "glm4_moe") {
        w.vector("moe.router_bias", num_experts, num_moe_layers);
      }
      w.matrix("experts.gate_up", expert_width, hidden, 2 * num_experts * num_moe_layers, WeightShard::kExpertRows);
      w.groups.back().experts = num_experts;
      w.matrix("experts.down", hidden, expert_width, num_experts * num_moe_layers, WeightShard::kExpertCols);
      w.groups.back().experts = num_experts;
      // Shared experts: DeepSeek / GLM give a count of expert-wide MLPs, Qwen2-MoE one width.
      int64_t shared_width = get_int(c, "n_shared_experts").value_or(0) * expert_width;
      if (auto qwen_shared = get_int(c, "shared_expert_intermediate_size"); qwen_shared && *qwen_shared > 0) {
        shared_width = *qwen_shared;
        w.vector("shared_expert.gate", hidden, num_moe_layers);
      }
      if (shared_width > 0) {
        w.matrix("shared_expert.gate_up", shared_width, hidden, 2 * num_moe_layers, WeightShard::kTpRows);
        w.matrix("shared_expert.down", hidden, shared_width, num_moe_layers, WeightShard::kTpCols);
      }
    }
    return Status::ok();
  };
  DENSA_RETURN_IF_ERROR(add_layers(0, num_layers));
  // DSA (GLM-5 / DeepSeek-V3.2): the lightning indexer of every layer, kept whole on every
  // rank: wq_b [heads * dim, q_lora_rank], wk [dim, hidden], its key LayerNorm (weight + bias),
  // weights_proj [heads, hidden] (BF16).
  if (const int64_t index_dim = get_int(c, "index_head_dim").value_or(0); index_dim > 0 && get_int(c, "index_topk")) {
    m.index_head_dim = index_dim;
    const int64_t index_heads = get_int(c, "index_n_heads").value_or(0);
    w.matrix("indexer.wq_b", index_heads * index_dim, get_int(c, "q_lora_rank").value_or(hidden), num_layers);
    w.matrix("indexer.wk", index_dim, hidden, num_layers);
    w.vector("indexer.k_norm", 2 * index_dim, num_layers);
    w.matrix("indexer.weights_proj", index_heads, hidden, num_layers);
    w.groups.back().quantizable = false;
  }
  // NextN / MTP layers: a decoder layer each, plus eh_proj [hidden, 2 * hidden], enorm, hnorm
  // and shared_head.norm. (Copies of the embeddings / lm_head some checkpoints store beside
  // them are not counted.)
  m.num_nextn_layers = get_int(c, "num_nextn_predict_layers").value_or(0);
  if (m.num_nextn_layers > 0) {
    w.nextn = true;
    DENSA_RETURN_IF_ERROR(add_layers(num_layers, m.num_nextn_layers));
    w.matrix("nextn.eh_proj", hidden, 2 * hidden, m.num_nextn_layers);
    w.vector("nextn.norms", 3 * hidden, m.num_nextn_layers);
    w.nextn = false;
  }
  m.vision_tower = root.contains("vision_config");
  m.weights = std::move(w.groups);
  return m;
}

namespace {

bool has(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

// How llama.cpp's tensors split under TP / EP (the split an HF config gets, by name; heads are
// not known here, so head-split dims split evenly).
WeightShard gguf_shard(const std::string& name, size_t dims) {
  if (dims < 2 || has(name, "ffn_gate_inp") || has(name, "attn_q_a.") || has(name, "attn_kv_a_mqa")) {
    return WeightShard::kReplicated;
  }
  if (has(name, "_exps")) return has(name, "ffn_down") ? WeightShard::kExpertCols : WeightShard::kExpertRows;
  if (has(name, "attn_output") || has(name, "ffn_down")) return WeightShard::kTpCols;
  return WeightShard::kTpRows;  // embeddings, output, q / k / v, q_b, kv_b, gate / up (shared too)
}

Result<CapacityModel> capacity_model_from_gguf(const std::filesystem::path& path) {
  DENSA_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
  CapacityModel m;
  m.source = path.string();
  m.architecture = f.get_string("general.architecture").value_or("");
  const std::string a = m.architecture + ".";
  auto key_int = [&](const std::string& key) { return f.get_int(a + key); };
  auto require = [&](const std::string& key) -> Result<int64_t> {
    std::optional<int64_t> v = key_int(key);
    if (!v || *v <= 0) return invalid_argument(m.source + ": missing or invalid GGUF key \"" + a + key + "\"");
    return *v;
  };
  DENSA_ASSIGN_OR_RETURN(m.num_layers, require("block_count"));
  m.max_position_embeddings = key_int("context_length").value_or(0);
  if (std::optional<int64_t> kv_lora = key_int("attention.kv_lora_rank"); kv_lora && *kv_lora > 0) {
    m.attention = KvAttention::kMla;
    m.kv_lora_rank = *kv_lora;
    DENSA_ASSIGN_OR_RETURN(m.qk_rope_head_dim, require("rope.dimension_count"));
  } else {
    DENSA_ASSIGN_OR_RETURN(const int64_t hidden, require("embedding_length"));
    DENSA_ASSIGN_OR_RETURN(const int64_t num_heads, require("attention.head_count"));
    m.attention = KvAttention::kGqa;
    m.num_kv_heads = key_int("attention.head_count_kv").value_or(num_heads);
    m.head_dim = key_int("attention.key_length").value_or(hidden / num_heads);
  }
  // Weights: the tensors themselves. ne[0] is the input dimension; 3-d tensors stack experts.
  for (const GgufTensorInfo& t : f.tensor_infos()) {
    if (t.ne.empty()) continue;
    const int64_t cols = t.ne[0];
    const int64_t rows = t.ne.size() > 1 ? t.ne[1] : 1;
    int64_t count = 1;
    for (size_t d = 2; d < t.ne.size(); ++d) count *= t.ne[d];
    const bool keep_bf16 = t.ne.size() == 1 || t.name == "token_embd.weight" ||
                           t.name == "output.weight" || t.name.find("ffn_gate_inp") != std::string::npos;
    WeightGroup g{t.name, rows, cols, count, !keep_bf16};
    g.shard = gguf_shard(t.name, t.ne.size());
    if (g.shard == WeightShard::kExpertRows || g.shard == WeightShard::kExpertCols) g.experts = count;
    m.weights.push_back(g);
  }
  return m;
}

}  // namespace

Result<CapacityModel> load_capacity_model(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path, ec)) file = path / "config.json";
  if (!std::filesystem::exists(file, ec)) return not_found(file.string() + ": no such file");
  if (file.extension() == ".gguf") return capacity_model_from_gguf(file);
  std::ifstream in(file, std::ios::binary);
  if (!in) return not_found(file.string() + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return capacity_model_from_hf_config(text.str(), file.string());
}

}  // namespace densa
