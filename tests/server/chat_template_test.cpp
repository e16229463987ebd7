#include "server/chat_template.h"

#include <gtest/gtest.h>

namespace densa::server {
namespace {

TEST(ServerChatTemplate, PlainFallback) {
  const std::vector<api::ChatMessage> messages = {{"system", "Be brief.", {}}, {"user", "Hi", {}}, {"assistant", "Hello", {}},
                                             {"tool", "42", {}},          {"developer", "D", {}}, {"user", "Bye", {}}};
  const ChatPrompt p = plain_chat_prompt(messages);
  EXPECT_EQ(p.text, "System: Be brief.\nUser: Hi\nAssistant: Hello\nTool: 42\nSystem: D\nUser: Bye\nAssistant:");
  EXPECT_EQ(p.stop, std::vector<std::string>{"\nUser:"});
}

}  // namespace
}  // namespace densa::server
