#pragma once
// ChatTemplate: turns chat messages into prompt text. densa carries no Jinja engine; it
// recognizes the common template families by marker substrings of the model's template text
// and formats them in C++. A model without a template (or an unknown one) gets the plain
// fallback, documented in server/README.md.
#include <string>
#include <string_view>
#include <vector>

#include "server/openai_request.h"

namespace densa::server {

enum class ChatTemplateFamily {
  kPlain,   // no/unknown template: "System: ...\nUser: ...\nAssistant: ...\nAssistant:"
  kLlama2,  // [INST] ... [/INST], <<SYS>> block in the first user turn
  kChatMl,  // <|im_start|>role\n...<|im_end|>
  kLlama3,  // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  kZephyr,  // <|role|>\n...</s>
};

ChatTemplateFamily detect_chat_template(std::string_view template_text);
const char* chat_template_family_name(ChatTemplateFamily family);

struct ChatPrompt {
  std::string text;                      // encode with BOS
  std::vector<std::string> stop;         // text that ends the assistant turn (plain fallback)
  std::vector<std::string> stop_pieces;  // control-token pieces that end the turn, if in vocab
};

// Formats `messages` and opens the assistant turn (add_generation_prompt).
ChatPrompt apply_chat_template(ChatTemplateFamily family, const std::vector<ChatMessage>& messages);

}  // namespace densa::server
