// Safetensors header (io/safetensors): any bytes either parse or give an error; every tensor
// of a file that parses lies inside the data section, and one of a dtype densa reads has
// exactly the bytes its shape needs.
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  std::vector<uint8_t> bytes(data, data + size);
  auto file = MappedFile::from_bytes(std::move(bytes), "fuzz.safetensors");
  const uint8_t* begin = file->data();
  Result<SafetensorsFile> parsed = SafetensorsFile::parse(std::move(file));
  if (!parsed.is_ok()) return 0;
  for (const SafetensorsTensor& t : parsed->tensors()) {
    FUZZ_ASSERT(t.nbytes <= size);
    if (t.nbytes > 0) FUZZ_ASSERT(t.data >= begin + 8 && t.data + t.nbytes <= begin + size);
    unsigned __int128 numel = 1;
    for (int64_t d : t.shape) {
      FUZZ_ASSERT(d >= 0);
      numel *= static_cast<uint64_t>(d);
    }
    Result<SafetensorsTensor> read = parsed->tensor(t.name);
    if (!read.is_ok()) continue;
    FUZZ_ASSERT(read->dtype.has_value());
    FUZZ_ASSERT(numel * static_cast<uint64_t>(dtype_block_bytes(*read->dtype)) == read->nbytes);
  }
  return 0;
}
