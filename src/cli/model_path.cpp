#include "cli/model_path.h"

#include <cstdlib>
#include <filesystem>

namespace densa::cli {

std::string default_model_path() {
  if (const char* env = std::getenv("DENSA_MODEL")) return env;
  const std::filesystem::path rel = "models/tinystories-mixtral-3.6m-f16.gguf";
  if (std::filesystem::exists(rel)) return rel.string();
  return (std::filesystem::path(DENSA_SOURCE_DIR) / rel).string();
}

}  // namespace densa::cli
