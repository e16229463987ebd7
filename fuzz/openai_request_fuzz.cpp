// OpenAI request bodies (api/openai_request): any body either parses or gives a 400 that
// names a reason; a request that parses has its fields within the documented limits.
#include <cstdint>
#include <string_view>

#include "api/openai_request.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  if (size == 0) return 0;
  // The first byte picks the endpoint; the rest is the body.
  const api::ApiKind kind = data[0] & 1 ? api::ApiKind::kChat : api::ApiKind::kCompletion;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)api::json_nesting_depth(body, api::kMaxRequestJsonDepth);
  api::RequestError error;
  std::optional<api::OpenAiRequest> req = api::parse_openai_request(kind, body, error);
  if (!req) {
    FUZZ_ASSERT(!error.status.is_ok() && !error.status.message().empty());
    return 0;
  }
  FUZZ_ASSERT(req->n >= 1 && req->n <= api::kMaxChoices);
  FUZZ_ASSERT(req->num_top_logprobs >= -1 && req->num_top_logprobs <= api::kMaxTopLogprobs);
  FUZZ_ASSERT(req->stop.size() <= static_cast<size_t>(api::kMaxStopStrings));
  FUZZ_ASSERT(!req->max_tokens || *req->max_tokens >= 1);
  if (kind == api::ApiKind::kChat) FUZZ_ASSERT(!req->messages.empty());
  if (kind == api::ApiKind::kCompletion) FUZZ_ASSERT(!req->prompts.empty());
  for (const api::PromptInput& p : req->prompts) {
    for (densa::TokenId id : p.ids) FUZZ_ASSERT(id >= 0);
  }
  return 0;
}
