// GGUF reader (io/gguf_file): any bytes either parse or give an error; for a file that parses,
// every tensor the reader hands out lies inside the file and has the byte size its shape and
// type need.
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "io/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  std::vector<uint8_t> bytes(data, data + size);
  Result<GgufFile> parsed = GgufFile::parse(MappedFile::from_bytes(std::move(bytes), "fuzz.gguf"));
  if (!parsed.is_ok()) return 0;
  const GgufFile& g = *parsed;
  for (const auto& [key, value] : g.metadata()) {
    (void)g.get_string(key);
    (void)g.get_int(key);
    (void)g.get_float(key);
    (void)g.get_string_array(key);
    (void)g.get_float_array(key);
    (void)g.get_int_array(key);
  }
  for (const GgufTensorInfo& info : g.tensor_infos()) {
    Result<GgufTensor> t = g.tensor(info.name);
    if (!t.is_ok()) continue;
    const unsigned __int128 numel = [&] {
      unsigned __int128 n = 1;
      for (int64_t d : t->ne) n *= static_cast<uint64_t>(d);
      return n;
    }();
    const int64_t block = dtype_block_elems(t->dtype);
    FUZZ_ASSERT(block > 0 && numel % block == 0);
    FUZZ_ASSERT(numel / block * static_cast<uint64_t>(dtype_block_bytes(t->dtype)) == t->nbytes);
    FUZZ_ASSERT(g.data_offset() + info.offset <= size && t->nbytes <= size - g.data_offset() - info.offset);
  }
  return 0;
}
