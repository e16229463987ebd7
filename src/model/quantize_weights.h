#pragma once
// Quantize-on-load: converts the large matrices of a ModelWeights (attention q/k/v/o, dense
// FFN, every expert's and the shared expert's gate/up/down) to a target weight format (quant/quantize_matrix.h), in
// buffers owned by the ModelWeights. Norms, biases, the MoE router (and its correction bias
// and the shared-expert gate), embeddings and lm_head stay as stored.
#include <functional>
#include <string>

#include "core/status.h"
#include "model/model_weights.h"
#include "quant/quantize_matrix.h"

namespace densa {

// Calls fn(name, view) for every matrix quantize_weights converts, layer by layer, with its
// Hugging Face tensor name without ".weight" (e.g. "model.layers.0.self_attn.q_proj").
void for_each_quantizable_matrix(ModelWeights& w, const std::function<void(const std::string&, WeightView&)>& fn);

// Converts every quantizable matrix of w to spec. on_matrix(done, total) reports progress.
// Fails (leaving w unchanged) if any matrix's shape does not fit the target.
Status quantize_weights(ModelWeights& w, const WeightQuantSpec& spec,
                        const std::function<void(int, int)>& on_matrix = nullptr);

}  // namespace densa
