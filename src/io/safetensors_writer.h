#pragma once
// Writes one safetensors file: 8-byte LE header length, a JSON header padded with spaces to a
// multiple of 8 bytes, then the tensors' bytes back to back, ordered by decreasing element size
// (stable) so each tensor is aligned to its element size. write_safetensors holds the tensors in
// memory; a writer that streams them (gen-model's) takes safetensors_layout and writes each
// tensor at its offset.
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

// A tensor's header entry, for writers that stream the data themselves.
struct SafetensorsOutInfo {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
};

struct SafetensorsLayout {
  std::string head;               // the 8-byte header length, then the padded JSON header
  std::vector<uint64_t> offsets;  // [tensors] tensor i's first byte, from the start of the file
  uint64_t file_bytes = 0;        // head + every tensor's bytes
};
SafetensorsLayout safetensors_layout(const std::vector<SafetensorsOutInfo>& tensors);

}  // namespace densa
