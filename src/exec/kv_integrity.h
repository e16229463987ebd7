#pragma once
// KV integrity settings and the error they produce. The policy is what `--kv-integrity`,
// the admin endpoint and EngineConfig set; a per-request override beats it either way.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace densa {

enum class KvIntegrityMode : uint8_t {
  kOff,     // nothing checked (a per-request override can still ask for tags)
  kTags,    // (page, tag) of every batch request vs the pool, every sample_every-th batch
  kDigest,  // tags, plus re-hashing full pages every digest_every-th checked batch
};

struct KvIntegrityPolicy {
  KvIntegrityMode mode = KvIntegrityMode::kOff;
  int32_t sample_every = 1;  // check 1 of every N batches that read cached KV (>= 1)
  int32_t digest_every = 1;  // kDigest: re-hash full pages on 1 of every N checked batches (>= 1)

  bool operator==(const KvIntegrityPolicy&) const = default;
};

// How one request overrides the policy (GenerateRequest::kv_integrity).
enum class IntegrityOverride : uint8_t { kDefault, kOff, kOn };

// Every violation's Status message starts with this code; the server maps it to the HTTP
// error code of the same name.
inline constexpr std::string_view kKvIntegrityViolation = "kv_integrity_violation";

inline bool is_kv_integrity_violation(const Status& s) {
  return (s.code() == StatusCode::kAborted || s.code() == StatusCode::kDataLoss) &&
         std::string_view(s.message()).substr(0, kKvIntegrityViolation.size()) == kKvIntegrityViolation;
}

// "kv_integrity_violation: <rest>" -> "kv_integrity_violation: request <id>: <rest>"; other
// statuses get " (request <id>)" appended.
inline Status attribute_to_request(const Status& s, uint64_t request_id) {
  const std::string who = "request " + std::to_string(request_id);
  if (!is_kv_integrity_violation(s)) return Status(s.code(), s.message() + " (" + who + ")");
  const size_t head = kKvIntegrityViolation.size() + 1;  // past the ':'
  std::string m = s.message();
  m.insert(std::min(head, m.size()), " " + who + ":");
  return Status(s.code(), std::move(m));
}

}  // namespace densa
