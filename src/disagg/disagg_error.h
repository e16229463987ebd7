#pragma once
// The two errors a disaggregated request can end with. Their Status messages start with the
// code, so the server maps them to the HTTP error code of the same name (502) wherever the
// Status travels (engine events, transfer threads).
#include <string>
#include <string_view>

#include "core/status.h"

namespace densa::disagg {

inline constexpr std::string_view kKvTransferFailed = "kv_transfer_failed";
inline constexpr std::string_view kKvLayoutMismatch = "kv_layout_mismatch";

// "kv_transfer_failed: <what>" (peer dead, timeout, bad digest, rejected write).
inline Status kv_transfer_failed(const std::string& what) {
  return unavailable(std::string(kKvTransferFailed) + ": " + what);
}
// "kv_layout_mismatch: <what>": the peers cannot exchange KV at all.
inline Status kv_layout_mismatch(const std::string& what) {
  return invalid_argument(std::string(kKvLayoutMismatch) + ": " + what);
}

// The disaggregation error code a Status carries, or empty.
inline std::string_view disagg_error_code(const Status& s) {
  const std::string_view m = s.message();
  for (std::string_view code : {kKvTransferFailed, kKvLayoutMismatch}) {
    if (m.substr(0, code.size()) == code && m.size() > code.size() && m[code.size()] == ':') return code;
  }
  return {};
}

}  // namespace densa::disagg
