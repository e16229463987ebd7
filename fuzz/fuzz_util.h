#pragma once
// Helpers shared by the fuzz targets. FUZZ_ASSERT states an invariant the parser promises for
// input it accepted; a violation aborts like a sanitizer finding, so libFuzzer records it.
#include <cstdio>
#include <cstdlib>

#define FUZZ_ASSERT(cond)                                                                  \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace densa::fuzz {

// FUZZ_VERBOSE=1 in the environment: targets print what each input gave (for checking that
// the seeds reach past the error paths).
inline bool verbose() {
  static const bool v = std::getenv("FUZZ_VERBOSE") != nullptr;
  return v;
}

// Separates the files of a multi-file input ("tokenizer.json\n=====\ntokenizer_config.json").
inline constexpr std::string_view kPartSeparator = "\n=====\n";

// The input cut at each kPartSeparator, at most `max_parts` pieces (the last keeps the rest).
inline std::vector<std::string_view> split_parts(std::string_view in, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t at = in.find(kPartSeparator);
    if (at == std::string_view::npos) break;
    parts.push_back(in.substr(0, at));
    in.remove_prefix(at + kPartSeparator.size());
  }
  parts.push_back(in);
  return parts;
}

// A per-process scratch directory for loaders that read files by path; write() replaces a
// file, drop() removes it, so each input sees exactly the files it names.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = std::filesystem::temp_directory_path() / ("densa-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  void write(const std::string& name, std::string_view bytes) const {
    std::ofstream(path_ / name, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  void drop(const std::string& name) const {
    std::error_code ec;
    std::filesystem::remove(path_ / name, ec);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace densa::fuzz
