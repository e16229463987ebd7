#include "io/safetensors.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace densa {
namespace {

using Json = nlohmann::json;

// Elements per tensor: far beyond any model, and small enough that numel * element size (at
// most 8 bytes) cannot wrap around, so the size check below compares real sizes.
constexpr uint64_t kMaxTensorElems = uint64_t{1} << 56;

struct StDType {
  const char* name;
  uint64_t elem_bytes;
  std::optional<DType> dtype;
};

constexpr StDType kStDTypes[] = {
    {"F32", 4, DType::kF32},     {"F16", 2, DType::kF16},         {"BF16", 2, DType::kBF16},
    {"F8_E4M3", 1, DType::kFP8E4M3}, {"I8", 1, DType::kI8},        {"U8", 1, DType::kU8},
    {"I32", 4, DType::kI32},     {"F64", 8, std::nullopt},        {"I64", 8, std::nullopt},
    {"U64", 8, std::nullopt},    {"I16", 2, std::nullopt},        {"U16", 2, std::nullopt},
    {"U32", 4, std::nullopt},    {"BOOL", 1, std::nullopt},       {"F8_E5M2", 1, std::nullopt},
};

const StDType* find_st_dtype(const std::string& name) {
  for (const auto& t : kStDTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

// Parses one header entry into `t` and validates it against the data section.
Status parse_entry(const std::string& fname, const std::string& name, const Json& e, const uint8_t* data,
                   uint64_t data_bytes, SafetensorsTensor& t) {
  const std::string what = fname + ": tensor '" + name + "'";
  if (!e.is_object()) return data_loss(what + ": header entry is not an object");
  const auto dt = e.find("dtype");
  const auto sh = e.find("shape");
  const auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) return data_loss(what + ": missing 'dtype'");
  if (sh == e.end() || !sh->is_array()) return data_loss(what + ": missing 'shape'");
  if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned()) {
    return data_loss(what + ": 'data_offsets' must be two non-negative integers");
  }
  t.name = name;
  t.dtype_name = dt->get<std::string>();
  const StDType* st = find_st_dtype(t.dtype_name);
  if (st != nullptr) t.dtype = st->dtype;
  uint64_t numel = 1;
  for (const Json& d : *sh) {
    if (!d.is_number_unsigned()) return data_loss(what + ": shape entries must be non-negative integers");
    const uint64_t n = d.get<uint64_t>();
    if (n != 0 && numel > kMaxTensorElems / n) return data_loss(what + ": shape overflows");
    numel *= n;
    t.shape.push_back(static_cast<int64_t>(n));
  }
  const uint64_t begin = (*off)[0].get<uint64_t>();
  const uint64_t end = (*off)[1].get<uint64_t>();
  if (begin > end || end > data_bytes) {
    return data_loss(what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") outside the data section of " + std::to_string(data_bytes) + " bytes");
  }
  if (st != nullptr && end - begin != numel * st->elem_bytes) {
    return data_loss(what + ": data_offsets span " + std::to_string(end - begin) + " bytes but shape and dtype " +
                     t.dtype_name + " need " + std::to_string(numel * st->elem_bytes));
  }
  t.data = data + begin;
  t.nbytes = end - begin;
  return Status::ok();
}

Result<std::string> read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  DENSA_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return parse(std::move(file));
}

Result<SafetensorsFile> SafetensorsFile::parse(std::unique_ptr<MappedFile> file) {
  const std::filesystem::path path = file->path();
  const std::string fname = path.string();
  const uint64_t size = file->size();
  if (size < 8) return data_loss(fname + ": truncated safetensors file (" + std::to_string(size) + " bytes)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file->data(), 8);
  if (header_len > size - 8) {
    return data_loss(fname + ": safetensors header length " + std::to_string(header_len) +
                     " goes beyond the end of the file (" + std::to_string(size) + " bytes)");
  }
  const char* header = reinterpret_cast<const char*>(file->data() + 8);
  Json j;
  try {
    j = Json::parse(header, header + header_len);
  } catch (const std::exception& e) {
    return data_loss(fname + ": malformed safetensors JSON header: " + e.what());
  }
  if (!j.is_object()) return data_loss(fname + ": safetensors header is not a JSON object");

  SafetensorsFile f;
  f.path_ = path;
  const uint8_t* data = file->data() + 8 + header_len;
  const uint64_t data_bytes = size - 8 - header_len;
  try {
    for (const auto& [name, entry] : j.items()) {
      if (name == "__metadata__") continue;
      SafetensorsTensor t;
      DENSA_RETURN_IF_ERROR(parse_entry(fname, name, entry, data, data_bytes, t));
      f.index_.emplace(name, f.tensors_.size());
      f.tensors_.push_back(std::move(t));
    }
  } catch (const std::exception& e) {
    return data_loss(fname + ": bad safetensors header: " + e.what());
  }
  f.file_ = std::move(file);
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<SafetensorsTensor> SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsTensor* t = find(name);
  if (t == nullptr) return not_found(path_.string() + ": missing tensor '" + std::string(name) + "'");
  if (!t->dtype.has_value()) {
    return unimplemented(path_.string() + ": tensor '" + t->name + "' has unsupported dtype " + t->dtype_name +
                         " (supported: F32, F16, BF16, F8_E4M3, I8, U8, I32)");
  }
  return *t;
}

Result<SafetensorsDir> SafetensorsDir::open(const std::filesystem::path& dir) {
  SafetensorsDir d;
  d.dir_ = dir;
  const auto single = dir / "model.safetensors";
  const auto index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (std::filesystem::exists(single, ec)) {
    DENSA_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(single));
    for (const auto& t : f.tensors()) d.shard_of_.emplace(t.name, 0);
    d.shards_.push_back(std::move(f));
    return d;
  }
  if (!std::filesystem::exists(index, ec)) {
    return not_found(dir.string() + ": neither model.safetensors nor model.safetensors.index.json found");
  }
  DENSA_ASSIGN_OR_RETURN(std::string text, read_text_file(index));
  const std::string iname = index.string();
  std::map<std::string, size_t> shard_idx;
  try {
    const Json j = Json::parse(text);
    const auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object()) return invalid_argument(iname + ": missing object 'weight_map'");
    for (const auto& [name, shard] : wm->items()) {
      if (!shard.is_string()) return invalid_argument(iname + ": weight_map['" + name + "'] is not a file name");
      const std::string shard_name = shard.get<std::string>();
      if (shard_name.find('/') != std::string::npos || shard_name == "..") {
        return invalid_argument(iname + ": weight_map['" + name + "'] names a file outside the directory");
      }
      auto it = shard_idx.find(shard_name);
      if (it == shard_idx.end()) {
        DENSA_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(dir / shard_name));
        it = shard_idx.emplace(shard_name, d.shards_.size()).first;
        d.shards_.push_back(std::move(f));
      }
      if (d.shards_[it->second].find(name) == nullptr) {
        return data_loss(iname + ": tensor '" + name + "' is mapped to " + shard_name + " which does not hold it");
      }
      d.shard_of_.emplace(name, it->second);
    }
  } catch (const std::exception& e) {
    return invalid_argument(iname + ": malformed index JSON: " + e.what());
  }
  return d;
}

bool SafetensorsDir::has_tensor(std::string_view name) const { return shard_of_.find(name) != shard_of_.end(); }

Result<SafetensorsTensor> SafetensorsDir::tensor(std::string_view name) const {
  const auto it = shard_of_.find(name);
  if (it == shard_of_.end()) return not_found(dir_.string() + ": missing tensor '" + std::string(name) + "'");
  return shards_[it->second].tensor(name);
}

std::vector<const SafetensorsTensor*> SafetensorsDir::all_tensors() const {
  std::vector<const SafetensorsTensor*> out;
  for (const SafetensorsFile& f : shards_) {
    for (const SafetensorsTensor& t : f.tensors()) out.push_back(&t);
  }
  return out;
}

std::vector<std::unique_ptr<MappedFile>> SafetensorsDir::release_files() {
  std::vector<std::unique_ptr<MappedFile>> out;
  for (auto& s : shards_) out.push_back(s.release_file());
  return out;
}

}  // namespace densa
