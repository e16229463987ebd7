#pragma once
// Writes a GGUF v3 file: header, metadata key/values (as given), the tensor directory, then
// each tensor's data at an offset that is a multiple of `alignment` (general.alignment, 32 by
// default) from the aligned start of the data section, as llama.cpp's reader requires.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "io/gguf_file.h"

namespace densa {

struct GgufOutTensor {
  std::string name;
  uint32_t ggml_type = 0;       // 0 f32, 1 f16, 2 q4_0, 8 q8_0, 30 bf16, ...
  std::vector<int64_t> ne;      // ne0 (contiguous) first
  std::vector<uint8_t> bytes;
};

// A tensor's directory entry, for writers that stream the data themselves.
struct GgufOutInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<int64_t> ne;  // ne0 (contiguous) first
  uint64_t nbytes = 0;
};

// The bytes before the data (magic, counts, metadata, directory) padded to `alignment`; tensor i
// goes at header.size() + offsets[i]; the data section is data_bytes long (padded likewise).
struct GgufLayout {
  std::string header;
  std::vector<uint64_t> offsets;
  uint64_t data_bytes = 0;
};
GgufLayout gguf_layout(const std::vector<std::pair<std::string, GgufValue>>& metadata,
                       const std::vector<GgufOutInfo>& tensors, uint64_t alignment = 32);

Status write_gguf(const std::filesystem::path& path, const std::vector<std::pair<std::string, GgufValue>>& metadata,
                  const std::vector<GgufOutTensor>& tensors, uint64_t alignment = 32);

}  // namespace densa
