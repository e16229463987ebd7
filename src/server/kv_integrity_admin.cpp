#include "server/kv_integrity_admin.h"

#include <charconv>
#include <cstdio>
#include <optional>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/completion_handler.h"
#include "server/openai_response.h"
#include "server/serving_context.h"
#include "server/serving_error.h"

namespace densa::server {
namespace {

constexpr const char* kRoute = "/admin/kv-integrity";

std::optional<int32_t> parse_count(std::string_view s) {
  int32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 1) return std::nullopt;
  return v;
}

void send_policy(httplib::Response& res, const KvIntegrityPolicy& p) {
  res.status = 200;
  res.set_content(dump_json({{"mode", kv_integrity_policy_name(p)}}), "application/json");
}

}  // namespace

Result<KvIntegrityPolicy> parse_kv_integrity_policy(std::string_view text) {
  const auto bad = [&] {
    return invalid_argument("KV integrity mode must be off, on, sample=N, digest or digest=N (N >= 1), not \"" +
                            std::string(text) + "\"");
  };
  if (text == "off") return KvIntegrityPolicy{KvIntegrityMode::kOff, 1, 1};
  if (text == "on") return KvIntegrityPolicy{KvIntegrityMode::kTags, 1, 1};
  if (text == "digest") return KvIntegrityPolicy{KvIntegrityMode::kDigest, 1, 1};
  for (const auto& [prefix, mode] : {std::pair<std::string_view, KvIntegrityMode>{"sample=", KvIntegrityMode::kTags},
                                     std::pair<std::string_view, KvIntegrityMode>{"digest=", KvIntegrityMode::kDigest}}) {
    if (text.substr(0, prefix.size()) != prefix) continue;
    const std::optional<int32_t> n = parse_count(text.substr(prefix.size()));
    if (!n) return bad();
    return mode == KvIntegrityMode::kTags ? KvIntegrityPolicy{mode, *n, 1} : KvIntegrityPolicy{mode, 1, *n};
  }
  return bad();
}

std::string kv_integrity_policy_name(const KvIntegrityPolicy& p) {
  switch (p.mode) {
    case KvIntegrityMode::kOff: return "off";
    case KvIntegrityMode::kTags: return p.sample_every <= 1 ? "on" : "sample=" + std::to_string(p.sample_every);
    case KvIntegrityMode::kDigest: return p.digest_every <= 1 ? "digest" : "digest=" + std::to_string(p.digest_every);
  }
  return "off";
}

void register_kv_integrity_admin(httplib::Server& http, ServingContext& ctx, const std::string& api_key) {
  const auto authorized = [api_key](const httplib::Request& req) {
    return api_key.empty() || req.get_header_value("Authorization") == "Bearer " + api_key;
  };
  http.Get(kRoute, [&ctx, authorized](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) return api::send_error(res, api::unauthorized_error());
    const std::optional<KvIntegrityPolicy> p = ctx.engine.kv_integrity();
    if (!p) return api::send_error(res, api_error(unimplemented("KV integrity checks are not switchable on this server")));
    send_policy(res, *p);
  });
  http.Post(kRoute, [&ctx, authorized](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) return api::send_error(res, api::unauthorized_error());
    const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("mode") || !body["mode"].is_string()) {
      return api::send_error(res, api_error(invalid_argument("body must be {\"mode\": \"off|on|sample=N|digest[=N]\"}"), "mode"));
    }
    const Result<KvIntegrityPolicy> p = parse_kv_integrity_policy(body["mode"].get<std::string>());
    if (!p.is_ok()) return api::send_error(res, api_error(p.status(), "mode"));
    if (Status s = ctx.engine.set_kv_integrity(*p); !s.is_ok()) return api::send_error(res, api_error(s));
    std::fprintf(stderr, "densa serve: kv integrity set to %s\n", kv_integrity_policy_name(*p).c_str());
    send_policy(res, *p);
  });
}

}  // namespace densa::server
