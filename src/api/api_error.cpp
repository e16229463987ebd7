#include "api/api_error.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

namespace densa::api {
namespace {

struct HttpMapping {
  int http_status;
  const char* type;
  int retry_after_s;
};

// THE table. `switch` without `default`: a new StatusCode fails to compile until mapped.
HttpMapping http_mapping(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return {200, "", 0};
    case StatusCode::kInvalidArgument: return {400, "invalid_request_error", 0};
    case StatusCode::kOutOfRange: return {400, "invalid_request_error", 0};
    case StatusCode::kNotFound: return {404, "invalid_request_error", 0};
    case StatusCode::kUnimplemented: return {501, "invalid_request_error", 0};
    case StatusCode::kResourceExhausted: return {429, "rate_limit_error", 1};
    case StatusCode::kUnavailable: return {503, "server_error", 1};
    case StatusCode::kAborted: return {500, "server_error", 0};
    case StatusCode::kDataLoss: return {500, "server_error", 0};
    case StatusCode::kInternal: return {500, "server_error", 0};
  }
  return {500, "server_error", 0};
}

}  // namespace

ApiError error_for_status(const Status& status, std::string param, std::string code) {
  const HttpMapping m = http_mapping(status.code());
  ApiError e;
  e.http_status = m.http_status;
  e.type = m.type;
  e.message = status.message();
  e.param = std::move(param);
  e.code = std::move(code);
  e.retry_after_s = m.retry_after_s;
  return e;
}

ApiError unauthorized_error() {
  return ApiError{401, "invalid_request_error", "Incorrect or missing API key (Authorization: Bearer KEY)",
                  "", "invalid_api_key", 0};
}

ApiError route_not_found_error(const std::string& method, const std::string& path) {
  return ApiError{404, "invalid_request_error", "Unknown route: " + method + " " + path, "", "unknown_url", 0};
}

ApiError body_too_large_error(size_t max_body_bytes) {
  return ApiError{413, "invalid_request_error",
                  "Request body is larger than the " + std::to_string(max_body_bytes) +
                      " bytes this server accepts (--max-body-bytes)",
                  "", "request_too_large", 0};
}

ApiError headers_too_large_error(size_t header_bytes, size_t max_header_bytes) {
  return ApiError{431, "invalid_request_error",
                  "Request headers are " + std::to_string(header_bytes) + " bytes, more than the " +
                      std::to_string(max_header_bytes) + " this server accepts (--max-header-bytes)",
                  "", "request_header_fields_too_large", 0};
}

ApiError uri_too_long_error() {
  return ApiError{414, "invalid_request_error", "Request URI is longer than the 8192 bytes this server accepts", "",
                  "request_uri_too_long", 0};
}

std::string error_body(const ApiError& error) {
  nlohmann::json body = {{"error",
                          {{"message", error.message},
                           {"type", error.type},
                           {"param", error.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.param)},
                           {"code", error.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.code)}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.http_status;
  if (error.retry_after_s > 0) res.set_header("Retry-After", std::to_string(error.retry_after_s));
  res.set_content(error_body(error), "application/json");
}

}  // namespace densa::api
