#pragma once
// Safetensors readers. SafetensorsFile maps one file (8-byte LE header length, JSON header,
// raw data) and validates every tensor's offsets and size at open. SafetensorsDir opens a
// Hugging Face directory: `model.safetensors` or the shards listed by
// `model.safetensors.index.json` (weight_map). Tensor data stays in the mappings (no copy).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/mapped_file.h"

namespace densa {

// A tensor inside a mapping: shape is outermost first (PyTorch order).
struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;         // as written in the header ("F32", "BF16", ...)
  std::optional<DType> dtype;     // nullopt: a dtype densa does not read
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // nbytes bytes
  uint64_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::filesystem::path& path);
  // Parses bytes already mapped or loaded (file->path() names them in messages).
  static Result<SafetensorsFile> parse(std::unique_ptr<MappedFile> file);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  // not_found if absent, unimplemented if its dtype is not one densa reads.
  Result<SafetensorsTensor> tensor(std::string_view name) const;

  // Hands over the mapping (tensor data pointers stay valid while it lives).
  std::unique_ptr<MappedFile> release_file() { return std::move(file_); }

 private:
  SafetensorsFile() = default;
  std::unique_ptr<MappedFile> file_;
  std::filesystem::path path_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

class SafetensorsDir {
 public:
  static Result<SafetensorsDir> open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  bool has_tensor(std::string_view name) const;
  // not_found (naming the directory) if no shard holds it.
  Result<SafetensorsTensor> tensor(std::string_view name) const;

  // Every tensor of every shard (any dtype), for checking what a loader did not read.
  std::vector<const SafetensorsTensor*> all_tensors() const;

  // Hands over every shard's mapping.
  std::vector<std::unique_ptr<MappedFile>> release_files();

 private:
  SafetensorsDir() = default;
  std::filesystem::path dir_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t, std::less<>> shard_of_;  // tensor name -> index into shards_
};

}  // namespace densa
