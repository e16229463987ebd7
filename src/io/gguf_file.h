#pragma once
// GgufFile: a memory-mapped GGUF (v2/v3) file: its metadata key/values and tensor directory.
// Every read is bounds-checked at open; tensor data stays in the mapping (no copy). Errors are
// one line naming the file, the key or tensor, and the problem.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/mapped_file.h"

namespace densa {

// GGUF metadata value types (numbers as in the file format).
enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// One metadata value. Scalars fill `integer` (ints, bool) or `real` (floats) or `str`;
// arrays fill the vector matching their element type (nested arrays go to `items`).
struct GgufValue {
  GgufType type = GgufType::kU8;
  GgufType elem_type = GgufType::kU8;  // arrays only
  int64_t integer = 0;
  double real = 0.0;
  std::string str;
  std::vector<int64_t> integers;     // integer/bool arrays
  std::vector<double> reals;         // float arrays
  std::vector<std::string> strings;  // string arrays
  std::vector<GgufValue> items;      // arrays of arrays
};

// A tensor as it lies in the file: ne[0] is the contiguous dimension.
struct GgufTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> ne;        // [n_dims], ne0 first
  const uint8_t* data = nullptr;  // nbytes bytes inside the mapping
  uint64_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
  }
};

// Any tensor whose block layout densa knows, as raw bytes: `dtype` is set when densa holds the
// type as a DType (f32, f16, bf16, q8_0, q4_0); the other block types (q4_K, ...) are converted
// by the model loader (quant/ggml_blocks.h).
struct GgufTensorBytes {
  std::string name;
  uint32_t ggml_type = 0;
  std::optional<DType> dtype;
  std::vector<int64_t> ne;        // [n_dims], ne0 first
  const uint8_t* data = nullptr;  // nbytes bytes inside the mapping
  uint64_t nbytes = 0;
};

// Directory entry, kept for every tensor including those with dtypes densa does not read.
struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<int64_t> ne;
  uint64_t offset = 0;  // relative to the data section
};

// Name of a ggml tensor type id ("q4_K", ...), for messages.
std::string ggml_type_name(uint32_t ggml_type);
// The ggml tensor type id densa reads as `dtype` (the inverse of the reader's table); nullopt
// for dtypes GGUF has no type for (FP8, INT4, ...).
std::optional<uint32_t> ggml_type_of(DType dtype);
// {elements, bytes} per block of a ggml type; nullopt when densa does not know its layout
// (the i-quants below 4 bits, the ternary types, ...).
std::optional<std::pair<int64_t, int64_t>> ggml_type_block(uint32_t ggml_type);

class GgufFile {
 public:
  static Result<GgufFile> open(const std::filesystem::path& path);
  static Result<GgufFile> parse(std::unique_ptr<MappedFile> file);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::filesystem::path& path() const { return path_; }

  // Metadata. Typed getters return nullopt when the key is absent or of another kind
  // (get_int accepts every integer type and bool; get_float accepts floats and integers).
  const GgufValue* find(std::string_view key) const;
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

  // Tensors. tensor(): not_found if absent, unimplemented if its ggml type is not a DType.
  // tensor_bytes(): any type of known block layout; unimplemented (naming the tensor and the
  // type) for the others.
  const std::vector<GgufTensorInfo>& tensor_infos() const { return infos_; }
  bool has_tensor(std::string_view name) const;
  const GgufTensorInfo* tensor_info(std::string_view name) const;  // nullptr if absent
  Result<GgufTensor> tensor(std::string_view name) const;
  Result<GgufTensorBytes> tensor_bytes(std::string_view name) const;

  // Hands over the mapping (tensor data pointers stay valid while it lives).
  std::unique_ptr<MappedFile> release_file() { return std::move(file_); }

 private:
  GgufFile() = default;
  std::unique_ptr<MappedFile> file_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::filesystem::path path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> infos_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace densa
