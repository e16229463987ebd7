#pragma once
// ApiError: an error as the OpenAI API returns it. The one table that maps a densa StatusCode
// to an HTTP status and an OpenAI error "type" lives in api_error.cpp; every error response
// of the server and the router goes through it (the server adds its own error codes on top:
// server/serving_error.h).
#include <string>

#include "core/status.h"

namespace httplib {
struct Response;
}

namespace densa::api {

struct ApiError {
  int http_status = 500;
  std::string type;     // OpenAI error type, e.g. "invalid_request_error"
  std::string message;
  std::string param;    // the offending request field; empty -> null
  std::string code;     // machine-readable code, e.g. "model_not_found"; empty -> null
  int retry_after_s = 0;  // > 0: send a Retry-After header (429)
};

// The table: StatusCode -> HTTP status + OpenAI type (+ Retry-After for 429).
// Precondition: !status.is_ok().
ApiError error_for_status(const Status& status, std::string param = {}, std::string code = {});

// Errors that no engine Status produces: bad or missing API key (401), unknown route (404).
ApiError unauthorized_error();
ApiError route_not_found_error(const std::string& method, const std::string& path);
// The HTTP layer's own limits (server/README.md "Limits"): a body past --max-body-bytes (413),
// headers past --max-header-bytes (431), a request line past httplib's 8 KiB (414).
ApiError body_too_large_error(size_t max_body_bytes);
ApiError headers_too_large_error(size_t header_bytes, size_t max_header_bytes);
ApiError uri_too_long_error();

// {"error":{"message","type","param","code"}}
std::string error_body(const ApiError& error);

// Writes `error` as the response (status, OpenAI body, Retry-After).
void send_error(httplib::Response& res, const ApiError& error);

}  // namespace densa::api
