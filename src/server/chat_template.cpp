#include "server/chat_template.h"

namespace densa::server {

ChatTemplateFamily detect_chat_template(std::string_view t) {
  if (t.find("<|start_header_id|>") != std::string_view::npos) return ChatTemplateFamily::kLlama3;
  if (t.find("<|im_start|>") != std::string_view::npos) return ChatTemplateFamily::kChatMl;
  if (t.find("[INST]") != std::string_view::npos) return ChatTemplateFamily::kLlama2;
  if (t.find("<|user|>") != std::string_view::npos && t.find("<|assistant|>") != std::string_view::npos)
    return ChatTemplateFamily::kZephyr;
  return ChatTemplateFamily::kPlain;
}

const char* chat_template_family_name(ChatTemplateFamily family) {
  switch (family) {
    case ChatTemplateFamily::kPlain: return "plain";
    case ChatTemplateFamily::kLlama2: return "llama2";
    case ChatTemplateFamily::kChatMl: return "chatml";
    case ChatTemplateFamily::kLlama3: return "llama3";
    case ChatTemplateFamily::kZephyr: return "zephyr";
  }
  return "plain";
}

namespace {

bool is_system(const ChatMessage& m) { return m.role == "system" || m.role == "developer"; }

ChatPrompt format_llama2(const std::vector<ChatMessage>& messages) {
  // <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] ...
  // The leading <s> comes from the tokenizer's BOS.
  ChatPrompt p;
  std::string system;
  bool first_user = true;
  for (const ChatMessage& m : messages) {
    if (is_system(m)) {
      system += m.content;
    } else if (m.role == "assistant") {
      p.text += " " + m.content + " </s><s>";
    } else {
      p.text += "[INST] ";
      if (first_user && !system.empty()) p.text += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
      first_user = false;
      p.text += m.content + " [/INST]";
    }
  }
  return p;
}

ChatPrompt format_chatml(const std::vector<ChatMessage>& messages) {
  ChatPrompt p;
  for (const ChatMessage& m : messages) p.text += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  p.text += "<|im_start|>assistant\n";
  p.stop_pieces = {"<|im_end|>"};
  return p;
}

ChatPrompt format_llama3(const std::vector<ChatMessage>& messages) {
  ChatPrompt p;
  for (const ChatMessage& m : messages)
    p.text += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
  p.text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  p.stop_pieces = {"<|eot_id|>"};
  return p;
}

ChatPrompt format_zephyr(const std::vector<ChatMessage>& messages) {
  ChatPrompt p;
  for (const ChatMessage& m : messages) p.text += "<|" + m.role + "|>\n" + m.content + "</s>\n";
  p.text += "<|assistant|>\n";
  return p;
}

ChatPrompt format_plain(const std::vector<ChatMessage>& messages) {
  ChatPrompt p;
  for (const ChatMessage& m : messages) {
    const char* who = is_system(m) ? "System" : m.role == "assistant" ? "Assistant" : m.role == "tool" ? "Tool" : "User";
    p.text += std::string(who) + ": " + m.content + "\n";
  }
  p.text += "Assistant:";
  p.stop = {"\nUser:"};
  return p;
}

}  // namespace

ChatPrompt apply_chat_template(ChatTemplateFamily family, const std::vector<ChatMessage>& messages) {
  switch (family) {
    case ChatTemplateFamily::kPlain: return format_plain(messages);
    case ChatTemplateFamily::kLlama2: return format_llama2(messages);
    case ChatTemplateFamily::kChatMl: return format_chatml(messages);
    case ChatTemplateFamily::kLlama3: return format_llama3(messages);
    case ChatTemplateFamily::kZephyr: return format_zephyr(messages);
  }
  return format_plain(messages);
}

}  // namespace densa::server
