#pragma once
// Loads a model from a GGUF file or a Hugging Face directory (config.json + safetensors,
// single or sharded). Errors are one line naming the file, the tensor and the problem.
#include <filesystem>
#include <optional>

#include "core/status.h"
#include "model/model_weights.h"

namespace densa {

struct LoadOptions {
  // Quantize-on-load target for the large matrices (attention, dense FFN, experts; norms,
  // router and embeddings stay as stored): kBF16, kFP8E4M3 (128x128 block scales) or kI4
  // (group-wise symmetric). nullopt keeps the checkpoint's own dtypes.
  std::optional<DType> weight_dtype;
  int weight_group_size = 128;  // INT4 group size: 32 or 128
};

Result<ModelWeights> load_model(const std::filesystem::path& path, const LoadOptions& options = {});

}  // namespace densa
