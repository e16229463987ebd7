#pragma once
// CompletionHandler: POST /v1/completions and /v1/chat/completions. Parses the body, turns
// prompts or messages into token ids, submits n engine requests per prompt and answers with
// one JSON response or an SSE stream. A stream whose client goes away cancels its requests.
#include <httplib.h>

#include "api/openai_request.h"
#include "server/serving_context.h"
#include "server/serving_error.h"

namespace densa::server {

class CompletionHandler {
 public:
  explicit CompletionHandler(ServingContext& ctx) : ctx_(ctx) {}
  // Never throws; every failure becomes an OpenAI error response.
  void handle(api::ApiKind kind, const httplib::Request& req, httplib::Response& res);

 private:
  // Prefill workers refuse OpenAI requests; decode workers need the prefill worker's URL.
  Status check_role(const httplib::Request& req, std::string& prefill_url) const;

  ServingContext& ctx_;
};

}  // namespace densa::server
