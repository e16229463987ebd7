#pragma once
// Strong integer IDs: distinct types so a PageId never passes for a SeqId. Absence is
// std::optional<Id>, never -1.
#include <cstdint>
#include <functional>
#include <ostream>

namespace densa {

template <typename Tag, typename Rep = int32_t>
struct StrongId {
  Rep value{};
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : value(v) {}
  constexpr auto operator<=>(const StrongId&) const = default;
};

// Logs and CHECK messages print the number.
template <typename Tag, typename Rep>
std::ostream& operator<<(std::ostream& os, const StrongId<Tag, Rep>& id) {
  return os << id.value;
}

using PageId = StrongId<struct PageIdTag>;
using SeqId = StrongId<struct SeqIdTag, int64_t>;
using LayerId = StrongId<struct LayerIdTag>;
using ExpertId = StrongId<struct ExpertIdTag>;
// One per request the engine admits, never reused within a process.
using RequestId = StrongId<struct RequestIdTag, uint64_t>;
// Token ids are stored in bulk (prompts, vocab tables), so they stay a plain int32 alias.
using TokenId = int32_t;

}  // namespace densa

template <typename Tag, typename Rep>
struct std::hash<densa::StrongId<Tag, Rep>> {
  size_t operator()(const densa::StrongId<Tag, Rep>& id) const noexcept {
    return std::hash<Rep>{}(id.value);
  }
};
