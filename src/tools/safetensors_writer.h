#pragma once
// Writes one safetensors file: 8-byte LE header length, a JSON header padded with spaces to a
// multiple of 8 bytes, then the tensors' bytes back to back, ordered by decreasing element size
// (stable) so each tensor is aligned to its element size. Tensors are held in memory.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"

namespace densa {

struct SafetensorsOut {
  std::string name;
  std::string dtype;            // "F32", "BF16", "F8_E4M3", "I32", ...
  std::vector<int64_t> shape;   // outermost first
  std::vector<uint8_t> bytes;   // numel * element size
};

Status write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsOut>& tensors);

}  // namespace densa
