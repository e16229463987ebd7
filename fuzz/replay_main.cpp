// Replays inputs through a fuzz target without libFuzzer: every regular file named on the
// command line, or found (recursively) under a directory named there, is passed once to
// LLVMFuzzerTestOneInput. A crash or sanitizer finding ends the process with its report; a
// missing path is an error, so a renamed corpus cannot silently replay nothing. README.md and
// dot files (.keep) are skipped.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int replay_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return 1;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A copy of exactly `size` bytes, so a read past the end is a heap overflow under ASan.
  std::vector<uint8_t> exact(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  int files = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> paths;
      for (const auto& e : fs::recursive_directory_iterator(arg)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && name != "README.md" && name[0] != '.') paths.push_back(e.path());
      }
      std::sort(paths.begin(), paths.end());
      for (const fs::path& p : paths) {
        if (replay_file(p) != 0) return 1;
        ++files;
      }
    } else if (fs::is_regular_file(arg, ec)) {
      if (replay_file(arg) != 0) return 1;
      ++files;
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[i]);
      return 1;
    }
  }
  std::printf("replayed %d inputs\n", files);
  return 0;
}
