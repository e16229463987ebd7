#pragma once
// The variables a chat template sees for an OpenAI chat-completions request, as vLLM builds
// them (chat_utils.parse_chat_messages + _postprocess_messages, then HF apply_chat_template):
//   messages   each {role, content, [tool_calls], [tool_call_id], [name], [reasoning_content]};
//              content strings as given, content-part arrays joined ("\n") from their text
//              parts, null content as ""; tool_calls' function.arguments JSON strings parsed
//              into objects (templates expect objects).
//   tools      the request's tools (null when absent, as HF passes tools=None), each function
//              with name / description / parameters (null when absent, as pydantic dumps them).
//   documents  the request's documents, or null.
//   add_generation_prompt  (default true), then bos_token / eos_token, then every
//              chat_template_kwargs entry at top level (overriding earlier keys).
// Refused by name (invalid_argument): non-text content parts (image_url, input_audio, ...),
// unknown message fields, malformed tool calls, arguments that are not JSON strings of a
// JSON value, continue_final_message=true.
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace densa {

struct ChatSpecialTokens {
  std::string bos_token;
  std::string eos_token;
};

Result<nlohmann::ordered_json> chat_template_vars(const nlohmann::ordered_json& request,
                                                  const ChatSpecialTokens& tokens);

}  // namespace densa
