#include "disagg/kv_wire.h"

#include <xxhash.h>

#include <cstring>

#include "disagg/disagg_error.h"

namespace densa::disagg {
namespace {

template <typename T>
void put(uint8_t*& p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) *p++ = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}

template <typename T>
T get(const uint8_t*& p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(*p++) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

void write_page_header(const KvPageHeader& h, std::span<uint8_t> out) {
  CHECK(out.size() >= kKvPageHeaderBytes) << "header buffer of " << out.size() << " bytes";
  uint8_t* p = out.data();
  put<uint32_t>(p, kKvWireMagic);
  put<uint16_t>(p, kKvWireVersion);
  put<uint16_t>(p, 0);
  put<uint64_t>(p, h.transfer_id);
  put<uint32_t>(p, h.page_idx);
  put<uint32_t>(p, h.num_pages);
  put<uint32_t>(p, h.page_tag);
  put<uint32_t>(p, h.num_tokens);
  put<uint64_t>(p, h.digest);
  put<uint64_t>(p, h.payload_bytes);
}

Result<KvPageHeader> read_page_header(std::span<const uint8_t> in) {
  if (in.size() < kKvPageHeaderBytes) {
    return kv_transfer_failed("page message of " + std::to_string(in.size()) + " bytes has no header");
  }
  const uint8_t* p = in.data();
  const uint32_t magic = get<uint32_t>(p);
  const uint16_t version = get<uint16_t>(p);
  get<uint16_t>(p);
  if (magic != kKvWireMagic) return kv_transfer_failed("page message without the KV wire magic");
  if (version != kKvWireVersion) {
    return kv_transfer_failed("KV wire version " + std::to_string(version) + ", expected " +
                              std::to_string(kKvWireVersion));
  }
  KvPageHeader h;
  h.transfer_id = get<uint64_t>(p);
  h.page_idx = get<uint32_t>(p);
  h.num_pages = get<uint32_t>(p);
  h.page_tag = get<uint32_t>(p);
  h.num_tokens = get<uint32_t>(p);
  h.digest = get<uint64_t>(p);
  h.payload_bytes = get<uint64_t>(p);
  return h;
}

uint64_t payload_digest(std::span<const uint8_t> payload) { return XXH3_64bits(payload.data(), payload.size()); }

}  // namespace densa::disagg
