#pragma once
// The model used when a command gets no -m: the MoE fixture shipped in the repo's models/.
#include <string>

namespace densa::cli {

std::string default_model_path();

}  // namespace densa::cli
