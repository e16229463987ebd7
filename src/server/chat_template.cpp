#include "server/chat_template.h"

namespace densa::server {

ChatPrompt plain_chat_prompt(const std::vector<api::ChatMessage>& messages) {
  ChatPrompt p;
  for (const api::ChatMessage& m : messages) {
    const bool system = m.role == "system" || m.role == "developer";
    const char* who = system ? "System" : m.role == "assistant" ? "Assistant" : m.role == "tool" ? "Tool" : "User";
    p.text += std::string(who) + ": " + m.content + "\n";
  }
  p.text += "Assistant:";
  p.stop = {"\nUser:"};
  return p;
}

}  // namespace densa::server
