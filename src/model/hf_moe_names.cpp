#include "model/hf_moe_names.h"

namespace densa {

HfMoeNames hf_moe_names(const ModelConfig& c) {
  if (c.architecture == "MixtralForCausalLM") {
    return {"block_sparse_moe.gate", "block_sparse_moe.experts.", "w1", "w3", "w2", "", "", ""};
  }
  HfMoeNames n{"mlp.gate", "mlp.experts.", "gate_proj", "up_proj", "down_proj", "", "", ""};
  if (c.architecture == "Qwen2MoeForCausalLM") {
    n.shared_prefix = "mlp.shared_expert.";
    n.shared_gate = "mlp.shared_expert_gate";
  }
  if (c.moe_routing == MoeRouting::kSigmoidGrouped) {  // GLM-4.5, DeepSeek-V3 and their MLA / DSA kin
    n.shared_prefix = "mlp.shared_experts.";
    n.router_bias = "mlp.gate.e_score_correction_bias";
  }
  return n;
}

}  // namespace densa
