#pragma once
// The KV integrity switch at the edge: the text form of a KvIntegrityPolicy (shared by
// `densa serve --kv-integrity` and the admin endpoint) and the admin route
//   GET  /admin/kv-integrity                 -> {"mode": "on"}
//   POST /admin/kv-integrity {"mode": "..."} -> sets it from the next batch on
// Both need the Bearer key when the server has one.
#include <string>
#include <string_view>

#include "core/status.h"
#include "exec/kv_integrity.h"

namespace httplib {
class Server;
}

namespace densa::server {

struct ServingContext;

// "off" | "on" | "sample=N" | "digest" | "digest=N" (digests re-checked on 1 of N batches).
Result<KvIntegrityPolicy> parse_kv_integrity_policy(std::string_view text);
// The inverse: the canonical text of a policy.
std::string kv_integrity_policy_name(const KvIntegrityPolicy& policy);

void register_kv_integrity_admin(httplib::Server& http, ServingContext& ctx, const std::string& api_key);

}  // namespace densa::server
