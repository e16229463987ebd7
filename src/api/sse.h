#pragma once
// Server-sent events as the OpenAI streaming API writes them: one "data: <json>" event per
// chunk, and a final "data: [DONE]".
#include <string>
#include <string_view>

namespace densa::api {

// "data: <payload>\n\n"
std::string sse_event(std::string_view payload);
// "data: [DONE]\n\n"
std::string sse_done();

}  // namespace densa::api
