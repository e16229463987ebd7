#include "tools/capacity/capacity_model.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "io/gguf_file.h"
#include "io/model_config.h"

namespace densa {
namespace {

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

namespace {

// The attention weights of n decoder layers; sets the model's KV shape.
void add_attention(const ModelConfig& c, int64_t n, CapacityModel& m, WeightList& w) {
  const int64_t hidden = c.hidden_size, num_heads = c.num_heads;
  if (c.is_mla()) {
    const MlaConfig& a = c.mla;
    m.attention = KvAttention::kMla;
    m.kv_lora_rank = a.kv_lora_rank;
    m.qk_rope_head_dim = a.qk_rope_head_dim;
    const int64_t q_dim = num_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim);
    if (a.q_lora_rank > 0) {
      w.matrix("attn.q_a", a.q_lora_rank, hidden, n);
      w.vector("attn.q_a_norm", a.q_lora_rank, n);
      w.matrix("attn.q_b", q_dim, a.q_lora_rank, n, WeightShard::kTpRows, num_heads);
    } else {
      w.matrix("attn.q", q_dim, hidden, n, WeightShard::kTpRows, num_heads);
    }
    w.matrix("attn.kv_a", m.kv_lora_rank + m.qk_rope_head_dim, hidden, n);
    w.vector("attn.kv_a_norm", m.kv_lora_rank, n);
    w.matrix("attn.kv_b", num_heads * (a.qk_nope_head_dim + a.v_head_dim), m.kv_lora_rank, n, WeightShard::kTpRows,
             num_heads);
    w.matrix("attn.o", hidden, num_heads * a.v_head_dim, n, WeightShard::kTpCols, num_heads);
    return;
  }
  m.attention = KvAttention::kGqa;
  m.num_kv_heads = c.num_kv_heads;
  m.head_dim = c.head_dim;
  const int64_t q_dim = num_heads * m.head_dim;
  const int64_t kv_dim = m.num_kv_heads * m.head_dim;
  w.matrix("attn.q", q_dim, hidden, n, WeightShard::kTpRows, num_heads);
  w.matrix("attn.k", kv_dim, hidden, n, WeightShard::kTpRows, m.num_kv_heads);
  w.matrix("attn.v", kv_dim, hidden, n, WeightShard::kTpRows, m.num_kv_heads);
  w.matrix("attn.o", hidden, q_dim, n, WeightShard::kTpCols, num_heads);
  if (c.attention_bias) w.vector("attn.qkv_bias", q_dim + 2 * kv_dim, n);
  if (c.qk_norm) w.vector("attn.qk_norm", 2 * m.head_dim, n);
}

// The feed-forward weights of decoder layers [first, first + n): dense layers and MoE layers.
void add_ffn(const ModelConfig& c, int first, int n, WeightList& w) {
  const int64_t hidden = c.hidden_size;
  int64_t num_moe_layers = 0;
  for (int i = first; i < first + n; ++i) num_moe_layers += c.is_moe_layer(i) ? 1 : 0;
  const int64_t num_dense_layers = n - num_moe_layers;
  if (num_dense_layers > 0) {
    w.matrix("mlp.gate_up", c.intermediate_size, hidden, 2 * num_dense_layers, WeightShard::kTpRows);
    w.matrix("mlp.down", hidden, c.intermediate_size, num_dense_layers, WeightShard::kTpCols);
  }
  if (num_moe_layers == 0) return;
  const int64_t experts = c.num_experts, width = c.moe_intermediate_size;
  w.matrix("moe.router", experts, hidden, num_moe_layers);
  w.groups.back().quantizable = false;
  if (c.moe_routing == MoeRouting::kSigmoidGrouped) w.vector("moe.router_bias", experts, num_moe_layers);
  w.matrix("experts.gate_up", width, hidden, 2 * experts * num_moe_layers, WeightShard::kExpertRows);
  w.groups.back().experts = experts;
  w.matrix("experts.down", hidden, width, experts * num_moe_layers, WeightShard::kExpertCols);
  w.groups.back().experts = experts;
  // Shared experts: DeepSeek / GLM give a count of expert-wide MLPs, Qwen2-MoE one width and
  // a gate.
  const int64_t shared_width = c.shared_expert_intermediate_size;
  if (c.shared_expert_gate) w.vector("shared_expert.gate", hidden, num_moe_layers);
  if (shared_width > 0) {
    w.matrix("shared_expert.gate_up", shared_width, hidden, 2 * num_moe_layers, WeightShard::kTpRows);
    w.matrix("shared_expert.down", hidden, shared_width, num_moe_layers, WeightShard::kTpCols);
  }
}

}  // namespace

CapacityModel capacity_model_from_config(const ModelConfig& c, const std::string& origin) {
  CapacityModel m;
  m.source = origin;
  m.architecture = c.architecture;
  m.num_layers = c.num_layers;
  m.max_position_embeddings = c.max_position_embeddings;
  const int64_t hidden = c.hidden_size;
  WeightList w;
  w.embedding("embed_tokens", c.vocab_size, hidden);
  if (!c.tie_word_embeddings) w.embedding("lm_head", c.vocab_size, hidden);
  w.vector("norm", hidden);
  w.vector("layer_norms", 2 * hidden, c.num_layers);
  add_attention(c, c.num_layers, m, w);
  add_ffn(c, 0, c.num_layers, w);
  // DSA (GLM-5 / DeepSeek-V3.2): the lightning indexer of every layer, kept whole on every
  // rank: wq_b [heads * dim, q_lora_rank], wk [dim, hidden], its key LayerNorm (weight + bias),
  // weights_proj [heads, hidden] (BF16).
  if (c.is_dsa()) {
    const DsaConfig& d = c.dsa;
    m.index_head_dim = d.index_head_dim;
    w.matrix("indexer.wq_b", int64_t{d.index_n_heads} * d.index_head_dim, c.mla.q_lora_rank, c.num_layers);
    w.matrix("indexer.wk", d.index_head_dim, hidden, c.num_layers);
    w.vector("indexer.k_norm", 2 * d.index_head_dim, c.num_layers);
    w.matrix("indexer.weights_proj", d.index_n_heads, hidden, c.num_layers);
    w.groups.back().quantizable = false;
  }
  // NextN / MTP layers: a decoder layer each, plus eh_proj [hidden, 2 * hidden], enorm, hnorm
  // and shared_head.norm. (Copies of the embeddings / lm_head some checkpoints store beside
  // them are not counted.)
  m.num_nextn_layers = c.num_nextn_layers;
  if (m.num_nextn_layers > 0) {
    w.nextn = true;
    w.vector("layer_norms", 2 * hidden, c.num_nextn_layers);
    CapacityModel ignored;  // the KV shape is the decoder's
    add_attention(c, c.num_nextn_layers, ignored, w);
    add_ffn(c, c.num_layers, c.num_nextn_layers, w);
    w.matrix("nextn.eh_proj", hidden, 2 * hidden, m.num_nextn_layers);
    w.vector("nextn.norms", 3 * hidden, m.num_nextn_layers);
    w.nextn = false;
  }
  m.vision_tower = c.has_vision_tower;
  m.weights = std::move(w.groups);
  return m;
}

Result<CapacityModel> capacity_model_from_hf_config(const std::string& json_text, const std::string& origin) {
  DENSA_ASSIGN_OR_RETURN(const ModelConfig c, parse_hf_config_text(json_text, origin));
  return capacity_model_from_config(c, origin);
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
