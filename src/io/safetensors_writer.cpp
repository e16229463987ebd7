#include "io/safetensors_writer.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

namespace densa {
namespace {

int element_bytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  return 1;
}

}  // namespace

SafetensorsLayout safetensors_layout(const std::vector<SafetensorsOutInfo>& tensors) {
  // Readers require the data ranges to be contiguous (no gaps), so instead of padding, tensors
  // are written in order of decreasing element size: every tensor then starts at a multiple of
  // its element size (the header is padded to 8 bytes).
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return element_bytes(tensors[a].dtype) > element_bytes(tensors[b].dtype);
  });
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<uint64_t> data_offset(tensors.size());
  uint64_t offset = 0;
  for (size_t i : order) {
    const SafetensorsOutInfo& t = tensors[i];
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    data_offset[i] = offset;
    offset += t.nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  SafetensorsLayout layout;
  const uint64_t n = text.size();
  layout.head.assign(reinterpret_cast<const char*>(&n), 8);
  layout.head += text;
  for (uint64_t& o : data_offset) o += layout.head.size();
  layout.offsets = std::move(data_offset);
  layout.file_bytes = layout.head.size() + offset;
  return layout;
}

Status write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsOut>& tensors) {
  std::vector<SafetensorsOutInfo> infos;
  infos.reserve(tensors.size());
  for (const SafetensorsOut& t : tensors) infos.push_back({t.name, t.dtype, t.shape, t.bytes.size()});
  const SafetensorsLayout layout = safetensors_layout(infos);
  std::vector<size_t> order(tensors.size());  // by offset: the file is written front to back
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return layout.offsets[a] < layout.offsets[b]; });
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return not_found(path.string() + ": cannot create");
  out.write(layout.head.data(), static_cast<std::streamsize>(layout.head.size()));
  for (size_t i : order) {
    out.write(reinterpret_cast<const char*>(tensors[i].bytes.data()), static_cast<std::streamsize>(tensors[i].bytes.size()));
  }
  out.flush();
  if (!out) return data_loss(path.string() + ": write failed");
  return Status::ok();
}

}  // namespace densa
