#pragma once
// CapacityModel: the few facts `densa capacity` needs about a model (its KV shape and the
// shape of every weight tensor), from a bare Hugging Face config.json or an HF directory
// (through ModelConfig, io/model_config.h: the one config.json parser, so the planner accepts
// and refuses exactly the configs `densa serve` does) or from a GGUF header and its tensor
// directory.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/model_config.h"

namespace densa {

enum class KvAttention : uint8_t {
  kGqa,  // K and V per KV head per token per layer
  kMla,  // one latent vector (kv_lora_rank + qk_rope_head_dim) per token per layer
};

// How a weight group is split over tensor-parallel (TP) and expert-parallel (EP) ranks.
enum class WeightShard : uint8_t {
  kReplicated,  // every rank holds it (norms, routers, MLA's q_a / kv_a latent projections)
  kTpRows,      // output dim split by TP (column-parallel; embeddings and lm_head: the vocab)
  kTpCols,      // input dim split by TP (row-parallel: o_proj, down_proj)
  kExpertRows,  // routed experts: experts split by EP, each expert's rows by TP / EP
  kExpertCols,  // the same, each expert's input dim split by TP / EP (down_proj)
};

// A group of `count` identical [rows, cols] weight tensors (vectors have rows = 1).
// Quantizable tensors are the linear layers of the transformer blocks; embeddings, lm_head,
// norms, routers and biases stay BF16 at every weight dtype.
struct WeightGroup {
  std::string name;  // e.g. "experts.down", for messages and tests
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t count = 1;
  bool quantizable = false;
  WeightShard shard = WeightShard::kReplicated;
  // Attention groups split by head: the split dim holds `heads` heads (a rank keeps
  // ceil(heads / tp), so KV heads fewer than ranks are replicated). 0 = split evenly.
  int64_t heads = 0;
  int64_t experts = 0;  // kExpert*: routed experts per layer (count = experts * layers * k)
  bool nextn = false;   // part of a NextN / MTP layer: in the checkpoint, not loaded

  int64_t num_params() const { return rows * cols * count; }
};

struct CapacityModel {
  std::string source;        // path it came from
  std::string architecture;  // "DeepseekV3ForCausalLM", GGUF "llama", ...
  KvAttention attention = KvAttention::kGqa;
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;      // GQA
  int64_t head_dim = 0;          // GQA
  int64_t kv_lora_rank = 0;      // MLA
  int64_t qk_rope_head_dim = 0;  // MLA
  int64_t max_position_embeddings = 0;
  int64_t num_nextn_layers = 0;  // num_nextn_predict_layers (their groups have nextn set)
  int64_t index_head_dim = 0;    // MLA+DSA: the lightning indexer's FP8 key per token per layer
  bool vision_tower = false;     // a multimodal wrapper's vision tower (not counted, not served)
  std::vector<WeightGroup> weights;

  int64_t num_params() const;  // what is loaded: without the NextN / MTP layers
};

// `path` is a config.json, a directory holding one, or a .gguf file.
Result<CapacityModel> load_capacity_model(const std::filesystem::path& path);
// From config.json text; `origin` names the source in errors.
Result<CapacityModel> capacity_model_from_hf_config(const std::string& json_text,
                                                    const std::string& origin);
// From a parsed config: every weight group of the checkpoint (NextN / MTP layers marked).
CapacityModel capacity_model_from_config(const ModelConfig& c, const std::string& origin);

}  // namespace densa
