#include "io/gguf_writer.h"

#include <fstream>

namespace densa {
namespace {

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_str(std::string& s, const std::string& v) {
  put<uint64_t>(s, v.size());
  s += v;
}

// A scalar of `type` taken from an integer or a real (array elements use this too).
void put_scalar(std::string& s, GgufType type, int64_t i, double r) {
  switch (type) {
    case GgufType::kU8: put<uint8_t>(s, static_cast<uint8_t>(i)); return;
    case GgufType::kI8: put<int8_t>(s, static_cast<int8_t>(i)); return;
    case GgufType::kU16: put<uint16_t>(s, static_cast<uint16_t>(i)); return;
    case GgufType::kI16: put<int16_t>(s, static_cast<int16_t>(i)); return;
    case GgufType::kU32: put<uint32_t>(s, static_cast<uint32_t>(i)); return;
    case GgufType::kI32: put<int32_t>(s, static_cast<int32_t>(i)); return;
    case GgufType::kU64: put<uint64_t>(s, static_cast<uint64_t>(i)); return;
    case GgufType::kI64: put<int64_t>(s, i); return;
    case GgufType::kBool: put<uint8_t>(s, i ? 1 : 0); return;
    case GgufType::kF32: put<float>(s, static_cast<float>(r)); return;
    case GgufType::kF64: put<double>(s, r); return;
    case GgufType::kString:
    case GgufType::kArray: return;  // not scalars
  }
}

void put_value(std::string& s, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kString: put_str(s, v.str); return;
    case GgufType::kArray:
      put<uint32_t>(s, static_cast<uint32_t>(v.elem_type));
      switch (v.elem_type) {
        case GgufType::kString:
          put<uint64_t>(s, v.strings.size());
          for (const auto& x : v.strings) put_str(s, x);
          return;
        case GgufType::kF32:
        case GgufType::kF64:
          put<uint64_t>(s, v.reals.size());
          for (double x : v.reals) put_scalar(s, v.elem_type, 0, x);
          return;
        case GgufType::kArray:
          put<uint64_t>(s, v.items.size());
          for (const auto& x : v.items) put_value(s, x);
          return;
        default:
          put<uint64_t>(s, v.integers.size());
          for (int64_t x : v.integers) put_scalar(s, v.elem_type, x, 0);
          return;
      }
    default: put_scalar(s, v.type, v.integer, v.real); return;
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

GgufLayout gguf_layout(const std::vector<std::pair<std::string, GgufValue>>& metadata,
                       const std::vector<GgufOutInfo>& tensors, uint64_t alignment) {
  GgufLayout l;
  std::string& head = l.header;
  put<uint32_t>(head, 0x46554747u);  // "GGUF"
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors.size());
  put<uint64_t>(head, metadata.size());
  for (const auto& [key, value] : metadata) {
    put_str(head, key);
    put<uint32_t>(head, static_cast<uint32_t>(value.type));
    put_value(head, value);
  }
  uint64_t offset = 0;
  for (const GgufOutInfo& t : tensors) {
    put_str(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, t.ggml_type);
    put<uint64_t>(head, offset);
    l.offsets.push_back(offset);
    offset = align_up(offset + t.nbytes, alignment);
  }
  head.append(align_up(head.size(), alignment) - head.size(), '\0');
  l.data_bytes = offset;
  return l;
}

Status write_gguf(const std::filesystem::path& path, const std::vector<std::pair<std::string, GgufValue>>& metadata,
                  const std::vector<GgufOutTensor>& tensors, uint64_t alignment) {
  std::vector<GgufOutInfo> infos;
  for (const GgufOutTensor& t : tensors) infos.push_back({t.name, t.ggml_type, t.ne, t.bytes.size()});
  const GgufLayout layout = gguf_layout(metadata, infos, alignment);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return not_found(path.string() + ": cannot create");
  out.write(layout.header.data(), static_cast<std::streamsize>(layout.header.size()));
  const std::string zeros(alignment, '\0');
  for (const GgufOutTensor& t : tensors) {
    out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
    out.write(zeros.data(), static_cast<std::streamsize>(align_up(t.bytes.size(), alignment) - t.bytes.size()));
  }
  out.flush();
  if (!out) return data_loss(path.string() + ": write failed");
  return Status::ok();
}

}  // namespace densa
