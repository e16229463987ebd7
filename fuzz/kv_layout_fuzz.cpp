// The KV layout descriptor a prefill worker receives in a prefill order (disagg/
// kv_layout_descriptor): any JSON either reads into a descriptor or gives an error; a
// descriptor read back from its own JSON is the same; one compatible with this worker's
// layout (per-head K / V, or an MLA latent row with DSA index keys) converts a page into its
// format without fault (the page message path).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "disagg/kv_layout_descriptor.h"
#include "disagg/kv_page_convert.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  using namespace densa::disagg;
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  Result<KvLayoutDescriptor> d = descriptor_from_json(j);
  if (!d.is_ok()) {
    FUZZ_ASSERT(!d.status().message().empty());
    return 0;
  }
  Result<KvLayoutDescriptor> again = descriptor_from_json(descriptor_to_json(*d));
  FUZZ_ASSERT(again.is_ok() && again->model_fingerprint == d->model_fingerprint);
  FUZZ_ASSERT(again->layout.page_bytes() == d->layout.page_bytes());

  // This worker, one of two: 2 layers, 2 kv heads of 8 (GQA) or a latent row of 12 with DSA
  // index keys of 4 (MLA), pages of 4 tokens, BF16, fingerprint 0x1234.
  for (const bool latent : {false, true}) {
    KvLayoutDescriptor mine;
    mine.model_fingerprint = 0x1234;
    mine.layout.num_layers = 2;
    mine.layout.num_kv_heads = latent ? 0 : 2;
    mine.layout.head_dim = latent ? 0 : 8;
    mine.layout.latent_dim = latent ? 12 : 0;
    mine.layout.index_dim = latent ? 4 : 0;
    mine.layout.page_size = 4;
    mine.layout.dtype = DType::kBF16;
    if (!check_compatible(mine, *d).is_ok()) continue;
    std::vector<uint8_t> src(static_cast<size_t>(mine.layout.page_bytes()));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(data[i % size] ^ i);
    std::vector<uint8_t> dst(static_cast<size_t>(d->layout.page_bytes()));
    for (int32_t tokens : {0, 1, mine.layout.page_size}) {
      convert_kv_page({mine.layout, {}}, src.data(), {d->layout, d->static_scales}, tokens, dst.data());
    }
  }
  return 0;
}
