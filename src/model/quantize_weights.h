#pragma once
// Quantize-on-load: converts the large matrices of a ModelWeights (attention q/k/v/o, dense
// FFN, every expert's and the shared expert's gate/up/down) to a target weight format (quant/quantize_matrix.h), in
// buffers owned by the ModelWeights. Norms, biases, the MoE router (and its correction bias
// and the shared-expert gate) and embeddings stay as stored; lm_head has its own call, so its
// precision is chosen separately from the body's.
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

// Converts lm_head to spec in a buffer owned by w; kept as is when already in that format.
// A tied lm_head (a view of tok_embeddings) gets its own converted copy: the embedding
// lookup keeps reading tok_embeddings as stored. Fails, leaving w unchanged, when lm_head's
// shape does not fit the target (e.g. INT4 g128 with a hidden size not a multiple of 128).
Status quantize_lm_head(ModelWeights& w, const WeightQuantSpec& spec);

// Repacks every GGUF Q4_0 / Q8_0 matrix of w (the quantizable ones and lm_head) in buffers
// owned by w, the same values in the layouts the VNNI kernels stream (the GGUF block layouts
// only have the exact fp32 kernel): Q4_0 -> INT4 g32 (quant/int4_group.h), Q8_0 -> INT8 g32
// (quant/int8_group.h), f16 scales kept. A tied lm_head and the embeddings share one
// repacked copy. Returns how many matrices changed.
int repack_ggml_for_kernels(ModelWeights& w);

// Copies every quantizable matrix and lm_head that still lies in a mapped file (or anywhere
// outside w.arena) into the arena, so the streams decode reads every step sit in huge pages
// (core/huge_page_arena.h) instead of 4 KiB page-cache pages. Values and formats unchanged; a
// tied lm_head and the embeddings share the copy. With w.int4_tiles, INT4 g32 matrices are
// laid out in 8-row tiles on the way (ModelWeights::adopt), row-major ones already in the
// arena included. Returns how many matrices moved.
int move_matrices_to_arena(ModelWeights& w);

}  // namespace densa
