#include "server/serving_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace densa::server {
namespace {

TEST(ServerApiError, TableMapsEveryStatusCode) {
  struct Row {
    StatusCode code;
    int http;
    const char* type;
  };
  const Row rows[] = {
      {StatusCode::kInvalidArgument, 400, "invalid_request_error"},
      {StatusCode::kOutOfRange, 400, "invalid_request_error"},
      {StatusCode::kNotFound, 404, "invalid_request_error"},
      {StatusCode::kUnimplemented, 501, "invalid_request_error"},
      {StatusCode::kResourceExhausted, 429, "rate_limit_error"},
      {StatusCode::kUnavailable, 503, "server_error"},
      {StatusCode::kAborted, 500, "server_error"},
      {StatusCode::kDataLoss, 500, "server_error"},
      {StatusCode::kInternal, 500, "server_error"},
  };
  for (const Row& r : rows) {
    const api::ApiError e = api_error(Status(r.code, "m"));
    EXPECT_EQ(e.http_status, r.http) << status_code_name(r.code);
    EXPECT_EQ(e.type, r.type) << status_code_name(r.code);
  }
  EXPECT_GT(api_error(resource_exhausted("full")).retry_after_s, 0);
  EXPECT_EQ(api_error(invalid_argument("x")).retry_after_s, 0);
}

TEST(ServerApiError, BodyHasOpenAiShape) {
  const auto body = nlohmann::json::parse(api::error_body(api_error(invalid_argument("bad n"), "n")));
  ASSERT_TRUE(body.contains("error"));
  EXPECT_EQ(body["error"]["message"], "bad n");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "n");
  EXPECT_TRUE(body["error"]["code"].is_null());
  const auto auth = nlohmann::json::parse(api::error_body(api::unauthorized_error()));
  EXPECT_EQ(auth["error"]["code"], "invalid_api_key");
  EXPECT_TRUE(auth["error"]["param"].is_null());
  EXPECT_EQ(api::unauthorized_error().http_status, 401);
}

}  // namespace
}  // namespace densa::server
