#pragma once
// Test-only writers for GGUF and safetensors files, used to build malformed inputs: copy a
// real fixture into a writer, change metadata or tensors, serialize, optionally corrupt bytes.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf_file.h"
#include "io/safetensors.h"

namespace densa::testing {

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename T>
void append_pod(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

inline void append_str(std::string& s, const std::string& v) {
  append_pod<uint64_t>(s, v.size());
  s += v;
}

// Serializes one value of `type` (scalar fields or the array vectors of `v`).
inline void append_gguf_value(std::string& s, GgufType type, const GgufValue& v) {
  switch (type) {
    case GgufType::kU8: append_pod<uint8_t>(s, static_cast<uint8_t>(v.integer)); return;
    case GgufType::kI8: append_pod<int8_t>(s, static_cast<int8_t>(v.integer)); return;
    case GgufType::kU16: append_pod<uint16_t>(s, static_cast<uint16_t>(v.integer)); return;
    case GgufType::kI16: append_pod<int16_t>(s, static_cast<int16_t>(v.integer)); return;
    case GgufType::kU32: append_pod<uint32_t>(s, static_cast<uint32_t>(v.integer)); return;
    case GgufType::kI32: append_pod<int32_t>(s, static_cast<int32_t>(v.integer)); return;
    case GgufType::kU64: append_pod<uint64_t>(s, static_cast<uint64_t>(v.integer)); return;
    case GgufType::kI64: append_pod<int64_t>(s, v.integer); return;
    case GgufType::kBool: append_pod<uint8_t>(s, v.integer ? 1 : 0); return;
    case GgufType::kF32: append_pod<float>(s, static_cast<float>(v.real)); return;
    case GgufType::kF64: append_pod<double>(s, v.real); return;
    case GgufType::kString: append_str(s, v.str); return;
    case GgufType::kArray: {
      append_pod<uint32_t>(s, static_cast<uint32_t>(v.elem_type));
      GgufValue item;
      switch (v.elem_type) {
        case GgufType::kString:
          append_pod<uint64_t>(s, v.strings.size());
          for (const auto& x : v.strings) append_str(s, x);
          return;
        case GgufType::kF32: case GgufType::kF64:
          append_pod<uint64_t>(s, v.reals.size());
          for (double x : v.reals) { item.real = x; append_gguf_value(s, v.elem_type, item); }
          return;
        case GgufType::kArray:
          append_pod<uint64_t>(s, v.items.size());
          for (const auto& x : v.items) append_gguf_value(s, GgufType::kArray, x);
          return;
        default:
          append_pod<uint64_t>(s, v.integers.size());
          for (int64_t x : v.integers) { item.integer = x; append_gguf_value(s, v.elem_type, item); }
          return;
      }
    }
  }
}

inline GgufValue gguf_str(std::string s) { GgufValue v; v.type = GgufType::kString; v.str = std::move(s); return v; }
inline GgufValue gguf_u32(int64_t i) { GgufValue v; v.type = GgufType::kU32; v.integer = i; return v; }

struct GgufWriterTensor {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<int64_t> ne;  // ne0 first
  std::string bytes;
};

struct GgufWriter {
  uint32_t version = 3;
  uint64_t alignment = 32;  // written as general.alignment only if set in kv
  std::vector<std::pair<std::string, GgufValue>> kv;
  std::vector<GgufWriterTensor> tensors;

  void set(const std::string& key, GgufValue v) {
    for (auto& [k, old] : kv) {
      if (k == key) { old = std::move(v); return; }
    }
    kv.emplace_back(key, std::move(v));
  }
  GgufWriterTensor* tensor(const std::string& name) {
    for (auto& t : tensors) if (t.name == name) return &t;
    return nullptr;
  }
  void erase_tensor(const std::string& name) {
    std::erase_if(tensors, [&](const GgufWriterTensor& t) { return t.name == name; });
  }

  std::string serialize() const {
    std::string s;
    append_pod<uint32_t>(s, 0x46554747);
    append_pod<uint32_t>(s, version);
    append_pod<uint64_t>(s, tensors.size());
    append_pod<uint64_t>(s, kv.size());
    for (const auto& [k, v] : kv) {
      append_str(s, k);
      append_pod<uint32_t>(s, static_cast<uint32_t>(v.type));
      append_gguf_value(s, v.type, v);
    }
    uint64_t offset = 0;
    for (const auto& t : tensors) {
      append_str(s, t.name);
      append_pod<uint32_t>(s, static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) append_pod<uint64_t>(s, static_cast<uint64_t>(d));
      append_pod<uint32_t>(s, t.ggml_type);
      append_pod<uint64_t>(s, offset);
      offset += (t.bytes.size() + alignment - 1) / alignment * alignment;
    }
    s.resize((s.size() + alignment - 1) / alignment * alignment, '\0');
    for (const auto& t : tensors) {
      s += t.bytes;
      s.resize((s.size() + alignment - 1) / alignment * alignment, '\0');
    }
    return s;
  }
};

// Copies every metadata value and tensor of `f` (tensors must have supported types).
inline GgufWriter gguf_writer_from(const GgufFile& f) {
  GgufWriter w;
  w.version = f.version();
  w.alignment = f.alignment();
  for (const auto& [k, v] : f.metadata()) w.kv.emplace_back(k, v);
  for (const auto& info : f.tensor_infos()) {
    auto t = f.tensor(info.name).value();
    w.tensors.push_back({t.name, ggml_type_of(t.dtype).value_or(0), t.ne,
                         std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
  }
  return w;
}

// ---- safetensors ----

struct StWriterTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

inline std::string serialize_safetensors(const std::vector<StWriterTensor>& tensors,
                                         const nlohmann::json& metadata = nullptr) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.is_null()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  std::string data;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
    data += t.bytes;
  }
  const std::string header = h.dump();
  std::string s;
  append_pod<uint64_t>(s, header.size());
  return s + header + data;
}

inline std::vector<StWriterTensor> safetensors_tensors_from(const SafetensorsFile& f) {
  std::vector<StWriterTensor> out;
  for (const auto& t : f.tensors()) {
    out.push_back({t.name, t.dtype_name, t.shape, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
  }
  return out;
}

// A fresh, empty directory under the system temp dir, unique per test.
inline std::filesystem::path fresh_temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("densa_io_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace densa::testing
