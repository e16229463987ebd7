#pragma once
// Loads a model from a GGUF file or a Hugging Face directory (config.json + safetensors,
// single or sharded). Errors are one line naming the file, the tensor and the problem.
#include <filesystem>

#include "core/status.h"
#include "model/model_weights.h"

namespace densa {

Result<ModelWeights> load_model(const std::filesystem::path& path);

}  // namespace densa
