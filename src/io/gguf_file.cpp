#include "io/gguf_file.h"

#include <cstring>

namespace densa {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;
// Elements per tensor: far beyond any model, and small enough that the byte size of every
// type (at most 8 bytes per element) fits in int64 without overflow (tensor() computes it so).
constexpr uint64_t kMaxTensorElems = uint64_t{1} << 56;

struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
  int64_t block_elems;  // 0 = size unknown to densa
  int64_t block_bytes;
  std::optional<DType> dtype;  // set when densa reads it
};

constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "f32", 1, 4, DType::kF32},      {1, "f16", 1, 2, DType::kF16},
    {2, "q4_0", 32, 18, DType::kQ4_0},  {3, "q4_1", 32, 20, std::nullopt},
    {6, "q5_0", 32, 22, std::nullopt},  {7, "q5_1", 32, 24, std::nullopt},
    {8, "q8_0", 32, 34, DType::kQ8_0},  {9, "q8_1", 32, 36, std::nullopt},
    {10, "q2_K", 256, 84, std::nullopt}, {11, "q3_K", 256, 110, std::nullopt},
    {12, "q4_K", 256, 144, std::nullopt}, {13, "q5_K", 256, 176, std::nullopt},
    {14, "q6_K", 256, 210, std::nullopt}, {15, "q8_K", 256, 292, std::nullopt},
    {16, "iq2_xxs", 0, 0, std::nullopt}, {17, "iq2_xs", 0, 0, std::nullopt},
    {18, "iq3_xxs", 0, 0, std::nullopt}, {19, "iq1_s", 0, 0, std::nullopt},
    {20, "iq4_nl", 32, 18, std::nullopt}, {21, "iq3_s", 0, 0, std::nullopt},
    {22, "iq2_s", 0, 0, std::nullopt},   {23, "iq4_xs", 256, 136, std::nullopt},
    {24, "i8", 1, 1, std::nullopt},      {25, "i16", 1, 2, std::nullopt},
    {26, "i32", 1, 4, std::nullopt},     {27, "i64", 1, 8, std::nullopt},
    {28, "f64", 1, 8, std::nullopt},     {29, "iq1_m", 0, 0, std::nullopt},
    {30, "bf16", 1, 2, DType::kBF16},    {34, "tq1_0", 0, 0, std::nullopt},
    {35, "tq2_0", 0, 0, std::nullopt},   {39, "mxfp4", 32, 17, std::nullopt},
    {40, "nvfp4", 0, 0, std::nullopt},   {41, "q1_0", 0, 0, std::nullopt},
    {42, "q2_0", 0, 0, std::nullopt},
};

const GgmlTypeInfo* find_ggml_type(uint32_t id) {
  for (const auto& t : kGgmlTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

// Bounds-checked little-endian cursor over the mapped header.
class Reader {
 public:
  Reader(const uint8_t* data, uint64_t size, std::string file) : data_(data), size_(size), file_(std::move(file)) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Status truncated(const std::string& what) const {
    return data_loss(file_ + ": truncated GGUF header at byte " + std::to_string(pos_) + " reading " + what +
                     " (file is " + std::to_string(size_) + " bytes)");
  }

  template <typename T>
  Status read(T& out, const std::string& what) {
    if (remaining() < sizeof(T)) return truncated(what);
    std::memcpy(&out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }

  Status read_string(std::string& out, const std::string& what) {
    uint64_t len = 0;
    DENSA_RETURN_IF_ERROR(read(len, what + " length"));
    if (len > remaining()) {
      return data_loss(file_ + ": " + what + " has length " + std::to_string(len) + " beyond the end of the file (" +
                       std::to_string(remaining()) + " bytes left at byte " + std::to_string(pos_) + ")");
    }
    out.assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::ok();
  }

  Status read_value(GgufType type, GgufValue& v, const std::string& what, int depth);

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::string file_;
};

// Smallest encoded size of one element, used to reject array counts beyond the file.
uint64_t min_elem_bytes(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
  }
  return 1;
}

template <typename T>
Status read_int(Reader& r, int64_t& out, const std::string& what) {
  T v{};
  DENSA_RETURN_IF_ERROR(r.read(v, what));
  out = static_cast<int64_t>(v);
  return Status::ok();
}

template <typename T>
Status read_real(Reader& r, double& out, const std::string& what) {
  T v{};
  DENSA_RETURN_IF_ERROR(r.read(v, what));
  out = static_cast<double>(v);
  return Status::ok();
}

Status Reader::read_value(GgufType type, GgufValue& v, const std::string& what, int depth) {
  v.type = type;
  switch (type) {
    case GgufType::kU8: return read_int<uint8_t>(*this, v.integer, what);
    case GgufType::kI8: return read_int<int8_t>(*this, v.integer, what);
    case GgufType::kU16: return read_int<uint16_t>(*this, v.integer, what);
    case GgufType::kI16: return read_int<int16_t>(*this, v.integer, what);
    case GgufType::kU32: return read_int<uint32_t>(*this, v.integer, what);
    case GgufType::kI32: return read_int<int32_t>(*this, v.integer, what);
    case GgufType::kU64: return read_int<uint64_t>(*this, v.integer, what);
    case GgufType::kI64: return read_int<int64_t>(*this, v.integer, what);
    case GgufType::kBool: {
      uint8_t b = 0;
      DENSA_RETURN_IF_ERROR(read(b, what));
      if (b > 1) return data_loss(file_ + ": " + what + ": bool value " + std::to_string(b) + " is not 0 or 1");
      v.integer = b;
      return Status::ok();
    }
    case GgufType::kF32: return read_real<float>(*this, v.real, what);
    case GgufType::kF64: return read_real<double>(*this, v.real, what);
    case GgufType::kString: return read_string(v.str, what);
    case GgufType::kArray: {
      if (depth >= kMaxArrayDepth) return data_loss(file_ + ": " + what + ": arrays nested too deeply");
      uint32_t elem = 0;
      uint64_t count = 0;
      DENSA_RETURN_IF_ERROR(read(elem, what + " element type"));
      if (elem > static_cast<uint32_t>(GgufType::kF64)) {
        return data_loss(file_ + ": " + what + ": unknown array element type " + std::to_string(elem));
      }
      DENSA_RETURN_IF_ERROR(read(count, what + " array count"));
      v.elem_type = static_cast<GgufType>(elem);
      if (count > remaining() / min_elem_bytes(v.elem_type)) {
        return data_loss(file_ + ": " + what + ": array count " + std::to_string(count) +
                         " goes beyond the end of the file");
      }
      GgufValue item;
      for (uint64_t i = 0; i < count; ++i) {
        item = GgufValue{};
        DENSA_RETURN_IF_ERROR(read_value(v.elem_type, item, what, depth + 1));
        switch (v.elem_type) {
          case GgufType::kString: v.strings.push_back(std::move(item.str)); break;
          case GgufType::kF32: case GgufType::kF64: v.reals.push_back(item.real); break;
          case GgufType::kArray: v.items.push_back(std::move(item)); break;
          case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16:
          case GgufType::kU32: case GgufType::kI32: case GgufType::kU64: case GgufType::kI64:
          case GgufType::kBool: v.integers.push_back(item.integer); break;
        }
      }
      return Status::ok();
    }
  }
  return data_loss(file_ + ": " + what + ": unknown value type " + std::to_string(static_cast<uint32_t>(type)));
}

bool is_integer_type(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16: case GgufType::kU32:
    case GgufType::kI32: case GgufType::kU64: case GgufType::kI64: case GgufType::kBool: return true;
    case GgufType::kF32: case GgufType::kF64: case GgufType::kString: case GgufType::kArray: return false;
  }
  return false;
}

}  // namespace

std::string ggml_type_name(uint32_t ggml_type) {
  const GgmlTypeInfo* t = find_ggml_type(ggml_type);
  return t ? t->name : "ggml type " + std::to_string(ggml_type);
}

std::optional<uint32_t> ggml_type_of(DType dtype) {
  for (const auto& t : kGgmlTypes) {
    if (t.dtype == dtype) return t.id;
  }
  return std::nullopt;
}

Result<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  DENSA_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return parse(std::move(file));
}

Result<GgufFile> GgufFile::parse(std::unique_ptr<MappedFile> file) {
  GgufFile g;
  g.path_ = file->path();
  g.base_ = file->data();
  g.size_ = file->size();
  g.file_ = std::move(file);
  const std::string fname = g.path_.string();
  Reader r(g.base_, g.size_, fname);

  uint32_t magic = 0;
  DENSA_RETURN_IF_ERROR(r.read(magic, "magic"));
  if (magic != kGgufMagic) return invalid_argument(fname + ": not a GGUF file (bad magic)");
  DENSA_RETURN_IF_ERROR(r.read(g.version_, "version"));
  if (g.version_ != 2 && g.version_ != 3) {
    return invalid_argument(fname + ": unsupported GGUF version " + std::to_string(g.version_) + " (supported: 2, 3)");
  }
  uint64_t num_tensors = 0, num_kv = 0;
  DENSA_RETURN_IF_ERROR(r.read(num_tensors, "tensor count"));
  DENSA_RETURN_IF_ERROR(r.read(num_kv, "metadata count"));
  if (num_kv > r.remaining() / 12 || num_tensors > r.remaining() / 24) {
    return data_loss(fname + ": tensor count " + std::to_string(num_tensors) + " / metadata count " +
                     std::to_string(num_kv) + " beyond the end of the file");
  }

  for (uint64_t i = 0; i < num_kv; ++i) {
    std::string key;
    DENSA_RETURN_IF_ERROR(r.read_string(key, "metadata key #" + std::to_string(i)));
    uint32_t type = 0;
    DENSA_RETURN_IF_ERROR(r.read(type, "type of metadata '" + key + "'"));
    GgufValue v;
    DENSA_RETURN_IF_ERROR(r.read_value(static_cast<GgufType>(type), v, "metadata '" + key + "'", 0));
    g.metadata_[key] = std::move(v);
  }

  if (const GgufValue* a = g.find("general.alignment")) {
    if (!is_integer_type(a->type) || a->integer <= 0 || (a->integer & (a->integer - 1)) != 0) {
      return data_loss(fname + ": general.alignment must be a positive power of two");
    }
    g.alignment_ = static_cast<uint64_t>(a->integer);
  }

  g.infos_.reserve(num_tensors);
  for (uint64_t i = 0; i < num_tensors; ++i) {
    GgufTensorInfo info;
    DENSA_RETURN_IF_ERROR(r.read_string(info.name, "tensor name #" + std::to_string(i)));
    const std::string what = "tensor '" + info.name + "'";
    uint32_t n_dims = 0;
    DENSA_RETURN_IF_ERROR(r.read(n_dims, what + " n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return data_loss(fname + ": " + what + " has " + std::to_string(n_dims) + " dims (1..4 allowed)");
    }
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t n = 0;
      DENSA_RETURN_IF_ERROR(r.read(n, what + " dim"));
      if (n == 0 || n > (uint64_t{1} << 40) || static_cast<uint64_t>(numel) > kMaxTensorElems / n) {
        return data_loss(fname + ": " + what + " has invalid dimension " + std::to_string(n));
      }
      numel *= static_cast<int64_t>(n);
      info.ne.push_back(static_cast<int64_t>(n));
    }
    DENSA_RETURN_IF_ERROR(r.read(info.ggml_type, what + " type"));
    DENSA_RETURN_IF_ERROR(r.read(info.offset, what + " offset"));
    if (!g.tensor_index_.emplace(info.name, g.infos_.size()).second) {
      return data_loss(fname + ": duplicate " + what);
    }
    g.infos_.push_back(std::move(info));
  }

  g.data_offset_ = (r.pos() + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  if (g.data_offset_ > g.size_) return r.truncated("start of tensor data");

  // Validate every tensor whose byte size is known: aligned and inside the file.
  for (const GgufTensorInfo& info : g.infos_) {
    const GgmlTypeInfo* t = find_ggml_type(info.ggml_type);
    if (info.offset % g.alignment_ != 0) {
      return data_loss(fname + ": tensor '" + info.name + "' data offset " + std::to_string(info.offset) +
                       " is not a multiple of the alignment " + std::to_string(g.alignment_));
    }
    if (t == nullptr || t->block_elems == 0) continue;
    if (info.ne[0] % t->block_elems != 0) {
      return data_loss(fname + ": tensor '" + info.name + "' ne0 " + std::to_string(info.ne[0]) +
                       " is not a multiple of the " + t->name + " block size");
    }
    uint64_t rows = 1;
    for (size_t d = 1; d < info.ne.size(); ++d) rows *= static_cast<uint64_t>(info.ne[d]);
    const uint64_t nbytes = rows * static_cast<uint64_t>(info.ne[0] / t->block_elems * t->block_bytes);
    const uint64_t avail = g.size_ - g.data_offset_;
    if (info.offset > avail || nbytes > avail - info.offset) {
      return data_loss(fname + ": tensor '" + info.name + "' data out of bounds: bytes [" +
                       std::to_string(g.data_offset_ + info.offset) + ", " +
                       std::to_string(g.data_offset_ + info.offset + nbytes) + ") but the file is " +
                       std::to_string(g.size_) + " bytes");
    }
  }
  return g;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kString) return std::nullopt;
  return v->str;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !is_integer_type(v->type)) return std::nullopt;
  return v->integer;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type == GgufType::kF32 || v->type == GgufType::kF64) return v->real;
  if (is_integer_type(v->type)) return static_cast<double>(v->integer);
  return std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !is_integer_type(v->type)) return std::nullopt;
  return v->integer != 0;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kArray || v->elem_type != GgufType::kString) return std::nullopt;
  return v->strings;
}

std::optional<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kArray) return std::nullopt;
  std::vector<float> out;
  if (v->elem_type == GgufType::kF32 || v->elem_type == GgufType::kF64) {
    for (double d : v->reals) out.push_back(static_cast<float>(d));
  } else if (is_integer_type(v->elem_type)) {
    for (int64_t i : v->integers) out.push_back(static_cast<float>(i));
  } else {
    return std::nullopt;
  }
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kArray || !is_integer_type(v->elem_type)) return std::nullopt;
  return v->integers;
}

bool GgufFile::has_tensor(std::string_view name) const { return tensor_index_.find(name) != tensor_index_.end(); }

const GgufTensorInfo* GgufFile::tensor_info(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &infos_[it->second];
}

Result<GgufTensorBytes> GgufFile::tensor_bytes(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) return not_found(path_.string() + ": missing tensor '" + std::string(name) + "'");
  const GgufTensorInfo& info = infos_[it->second];
  const GgmlTypeInfo* t = find_ggml_type(info.ggml_type);
  if (t == nullptr || t->block_elems == 0) {
    return unimplemented(path_.string() + ": tensor '" + info.name + "' has type " + ggml_type_name(info.ggml_type) +
                         ", which densa cannot read (its block layout is unknown to densa)");
  }
  GgufTensorBytes out;
  out.name = info.name;
  out.ggml_type = info.ggml_type;
  out.dtype = t->dtype;
  out.ne = info.ne;
  out.data = base_ + data_offset_ + info.offset;
  int64_t numel = 1;
  for (int64_t d : info.ne) numel *= d;
  out.nbytes = static_cast<uint64_t>(numel / t->block_elems * t->block_bytes);
  return out;
}

Result<GgufTensor> GgufFile::tensor(std::string_view name) const {
  DENSA_ASSIGN_OR_RETURN(GgufTensorBytes b, tensor_bytes(name));
  if (!b.dtype.has_value()) {
    return unimplemented(path_.string() + ": tensor '" + b.name + "' has type " + ggml_type_name(b.ggml_type) +
                         ", not a densa dtype (f32, f16, bf16, q8_0, q4_0); the model loader converts the other "
                         "GGUF block types (quant/ggml_blocks.h)");
  }
  GgufTensor out;
  out.name = b.name;
  out.dtype = *b.dtype;
  out.ne = b.ne;
  out.data = b.data;
  out.nbytes = b.nbytes;
  return out;
}

std::optional<std::pair<int64_t, int64_t>> ggml_type_block(uint32_t ggml_type) {
  const GgmlTypeInfo* t = find_ggml_type(ggml_type);
  if (t == nullptr || t->block_elems == 0) return std::nullopt;
  return std::make_pair(t->block_elems, t->block_bytes);
}

}  // namespace densa
