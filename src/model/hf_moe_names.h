#pragma once
// The Hugging Face tensor names of a MoE layer's parts, per architecture family, relative to
// "model.layers.{i}." and without ".weight". Shared by the loader, quantize-on-load naming and
// `densa quantize`, so a checkpoint written by densa loads back under the same names.
#include <string>

#include "io/model_config.h"

namespace densa {

struct HfMoeNames {
  std::string router;         // [num_experts, hidden]: "block_sparse_moe.gate" | "mlp.gate"
  std::string expert_prefix;  // + "{e}." + expert_gate|up|down
  std::string expert_gate, expert_up, expert_down;  // "w1" "w3" "w2" | "gate_proj" "up_proj" "down_proj"
  std::string shared_prefix;  // + "gate_proj"|"up_proj"|"down_proj"; empty = no shared expert
  std::string shared_gate;    // [1, hidden] sigmoid gate of the shared expert; empty = none
  std::string router_bias;    // full name of the [num_experts] correction bias; empty = none
};

HfMoeNames hf_moe_names(const ModelConfig& c);

}  // namespace densa
