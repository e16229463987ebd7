#pragma once
// --weight-dtype / --weight-group-size / --lm-head-dtype, shared by every command that loads a
// model, so a prefill worker can hold FP8 and a decode worker INT4 from the same checkpoint,
// and the output projection can take a precision of its own.
#include <string>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "model/model_loader.h"

namespace densa::cli {

struct WeightArgs {
  std::string weight_dtype;   // empty: as stored
  int weight_group_size = 128;
  std::string lm_head_dtype;  // empty: as stored
  std::string int4_layout = "tiles";  // tiles | tiles16 | tiles8 | rows (LoadOptions::int4_layout)
  std::string int8_layout = "tiles";  // tiles | rows (LoadOptions::int8_tiles)
  std::string ggml_blocks = "packed";  // packed | affine8 | f32 (LoadOptions::ggml_blocks)
  std::string bf16_activations = "auto";  // auto | f32 (LoadOptions::bf16_f32_activations)
};

void add_weight_options(CLI::App* cmd, WeightArgs& args);
// Maps the flags to LoadOptions; an unknown dtype is an invalid_argument naming the flag.
Result<LoadOptions> load_options_from(const WeightArgs& args);
// "weights int4-g32, lm_head bf16": what the loaded body matrices (layer 0's first attention
// matrix) and lm_head are stored as, in --weight-dtype names (f32 / f16 for float checkpoints).
std::string weight_precision_line(const ModelWeights& w);

// "N MiB of weights in the huge-page arena (transparent huge pages: MODE)" for the startup log.
std::string weight_memory_line(const ModelWeights& w);

}  // namespace densa::cli
