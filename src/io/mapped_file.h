#pragma once
// A read-only memory-mapped file. Owns the mapping; views into it stay valid while it lives.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"

namespace densa {

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::filesystem::path& path);
  // The same view over bytes held in memory (no mapping); `path` names them in messages.
  // For parsers fed from a buffer (fuzz targets, tests).
  static std::unique_ptr<MappedFile> from_bytes(std::vector<uint8_t> bytes, std::filesystem::path path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::filesystem::path path_;
  std::vector<uint8_t> owned_;  // from_bytes: the bytes data_ points into (nothing is mapped)
};

}  // namespace densa
