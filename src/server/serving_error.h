#pragma once
// The server's error responses: the protocol's StatusCode table (api/api_error.h) plus the
// error codes only serving produces, read from the Status a request failed with:
//   - "kv_integrity_violation" (exec/kv_integrity.h), the HTTP status of its StatusCode;
//   - "kv_transfer_failed" / "kv_layout_mismatch" (disagg/disagg_error.h): 502 with no
//     Retry-After, since the peer worker, not this one, failed the request.
#include <string>

#include "api/api_error.h"
#include "core/status.h"

namespace densa::server {

// Precondition: !status.is_ok().
api::ApiError api_error(const Status& status, std::string param = {}, std::string code = {});

}  // namespace densa::server
