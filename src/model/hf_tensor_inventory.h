#pragma once
// Every tensor of a Hugging Face checkpoint must be accounted for: read by the loader, or
// recognised as a part densa deliberately does not run. Recognised and skipped:
//  * the vision tower and multimodal projector of a wrapper whose text model densa serves
//    (config has_vision_tower: "vision_tower.*", "multi_modal_projector.*", "mm_projector.*");
//  * the multi-token-prediction blocks, "model.layers.{N}.*" for N in num_layers ..
//    num_layers + num_nextn_layers - 1 (their eh_proj, enorm, hnorm, shared_head.* and a full
//    decoder layer), after the wrapper prefix.
// A decoder layer's KV-cache scales (self_attn.k_scale / v_scale) are read elsewhere
// (quality/kv_calibration.h, `--kv-scales checkpoint`) and accepted without being counted.
// Anything else left unread is an error naming the tensor, so a checkpoint with parts densa
// does not understand is refused instead of being served without them.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/model_config.h"
#include "model/model_weights.h"

namespace densa {

struct CheckpointTensor {
  std::string name;
  int64_t bytes = 0;
};

// `read`: full names the loader asked for. Sibling tensors of a read pre-quantized matrix
// ("X.weight" read: "X.weight_packed", "X.weight_scale", "X.weight_shape",
// "X.weight_scale_inv") count as read.
Result<SkippedTensors> classify_unread_hf_tensors(const std::vector<CheckpointTensor>& tensors,
                                                  const std::set<std::string>& read, const ModelConfig& c,
                                                  const std::string& origin);

// One line per kind skipped, for the load log and `densa info`; empty when nothing was.
std::vector<std::string> describe_skipped(const SkippedTensors& s, const ModelConfig& c);

}  // namespace densa
