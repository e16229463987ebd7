#include "server/chat_template.h"

#include <gtest/gtest.h>

namespace densa::server {
namespace {

const std::vector<ChatMessage> kMessages = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};

TEST(ServerChatTemplate, DetectsFamiliesBySubstring) {
  EXPECT_EQ(detect_chat_template(""), ChatTemplateFamily::kPlain);
  EXPECT_EQ(detect_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}"), ChatTemplateFamily::kPlain);
  EXPECT_EQ(detect_chat_template("{{ bos_token + '[INST] ' + content + ' [/INST]' }}"), ChatTemplateFamily::kLlama2);
  EXPECT_EQ(detect_chat_template("{{'<|im_start|>' + message['role'] + '\\n'}}"), ChatTemplateFamily::kChatMl);
  EXPECT_EQ(detect_chat_template("<|start_header_id|>{{ role }}<|end_header_id|>"), ChatTemplateFamily::kLlama3);
  EXPECT_EQ(detect_chat_template("{% if role == 'user' %}<|user|>\n{% else %}<|assistant|>\n"), ChatTemplateFamily::kZephyr);
}

TEST(ServerChatTemplate, PlainFallback) {
  const ChatPrompt p = apply_chat_template(ChatTemplateFamily::kPlain, kMessages);
  EXPECT_EQ(p.text, "System: Be brief.\nUser: Hi\nAssistant: Hello\nUser: Bye\nAssistant:");
  EXPECT_EQ(p.stop, std::vector<std::string>{"\nUser:"});
}

TEST(ServerChatTemplate, Llama2) {
  EXPECT_EQ(apply_chat_template(ChatTemplateFamily::kLlama2, kMessages).text,
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Bye [/INST]");
}

TEST(ServerChatTemplate, ChatMl) {
  const ChatPrompt p = apply_chat_template(ChatTemplateFamily::kChatMl, {{"user", "Hi"}});
  EXPECT_EQ(p.text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(p.stop_pieces, std::vector<std::string>{"<|im_end|>"});
}

TEST(ServerChatTemplate, Llama3) {
  EXPECT_EQ(apply_chat_template(ChatTemplateFamily::kLlama3, {{"user", "Hi"}}).text,
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ServerChatTemplate, Zephyr) {
  EXPECT_EQ(apply_chat_template(ChatTemplateFamily::kZephyr, {{"system", "S"}, {"user", "Hi"}}).text,
            "<|system|>\nS</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
}

}  // namespace
}  // namespace densa::server
