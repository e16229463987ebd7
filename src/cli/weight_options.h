#pragma once
// --weight-dtype / --weight-group-size, shared by every command that loads a model, so a
// prefill worker can hold FP8 and a decode worker INT4 from the same checkpoint.
#include <string>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "model/model_loader.h"

namespace densa::cli {

struct WeightArgs {
  std::string weight_dtype;  // empty: as stored
  int weight_group_size = 128;
};

void add_weight_options(CLI::App* cmd, WeightArgs& args);
// Maps the flags to LoadOptions; an unknown dtype is an invalid_argument naming the flag.
Result<LoadOptions> load_options_from(const WeightArgs& args);

}  // namespace densa::cli
