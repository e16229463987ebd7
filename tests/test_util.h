#pragma once
// Shared helpers for tests: fixture paths and small file readers.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densa::testing {

inline std::filesystem::path models_dir() { return DENSA_MODELS_DIR; }
inline std::filesystem::path data_dir() { return DENSA_DATA_DIR; }
inline std::filesystem::path model_dir(const std::string& name) { return models_dir() / name; }

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename T>
std::vector<T> read_binary(const std::filesystem::path& p) {
  const std::string bytes = read_text(p);
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  return nlohmann::json::parse(read_text(p));
}

// valid.ids.u16.bin as token ids.
inline std::vector<int32_t> validation_ids(const std::string& model) {
  const auto raw = read_binary<uint16_t>(model_dir(model) / "golden" / "valid.ids.u16.bin");
  return {raw.begin(), raw.end()};
}

}  // namespace densa::testing
