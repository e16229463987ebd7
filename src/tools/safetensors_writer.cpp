#include "tools/safetensors_writer.h"

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

Status write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsOut>& tensors) {
  // Readers require the data ranges to be contiguous (no gaps), so instead of padding, tensors
  // are written in order of decreasing element size: every tensor then starts at a multiple of
  // its element size (the header is padded to 8 bytes).
  std::vector<const SafetensorsOut*> order;
  for (const SafetensorsOut& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const SafetensorsOut* a, const SafetensorsOut* b) {
    return element_bytes(a->dtype) > element_bytes(b->dtype);
  });
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const SafetensorsOut* t : order) {
    header[t->name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return not_found(path.string() + ": cannot create");
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const SafetensorsOut* t : order) {
    out.write(reinterpret_cast<const char*>(t->bytes.data()), static_cast<std::streamsize>(t->bytes.size()));
  }
  out.flush();
  if (!out) return data_loss(path.string() + ": write failed");
  return Status::ok();
}

}  // namespace densa
