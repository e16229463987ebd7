#include "router/request_cost.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace densa::router {
namespace {

using nlohmann::json;

int64_t text_tokens(const std::string& text) {
  return (static_cast<int64_t>(text.size()) + kBytesPerTokenGuess - 1) / kBytesPerTokenGuess;
}

// One completions prompt: text (+1 for BOS) or a token-id array. Other shapes cost 0.
int64_t one_prompt_tokens(const json& p) {
  if (p.is_string()) return text_tokens(p.get_ref<const std::string&>()) + 1;
  if (p.is_array() && (p.empty() || p.front().is_number())) return static_cast<int64_t>(p.size());
  return 0;
}

// Text of a chat message's content: a string or a list of {"type": "text", "text": ...} parts.
int64_t content_tokens(const json& content) {
  if (content.is_string()) return text_tokens(content.get_ref<const std::string&>());
  int64_t n = 0;
  if (content.is_array())
    for (const json& part : content)
      if (part.is_object())
        if (auto t = part.find("text"); t != part.end() && t->is_string()) n += text_tokens(t->get_ref<const std::string&>());
  return n;
}

// Per chat message: role markers and separators of a template, roughly.
constexpr int64_t kChatMessageOverheadTokens = 4;

}  // namespace

RequestCost estimate_request_cost(api::ApiKind kind, std::string_view body) {
  RequestCost cost;
  const bool chat = kind == api::ApiKind::kChat;
  int64_t max_tokens = chat ? kDefaultChatMaxTokensGuess : kDefaultCompletionMaxTokens;
  // Deeper bodies are not parsed (the server refuses them too).
  if (api::json_nesting_depth(body, api::kMaxRequestJsonDepth) > api::kMaxRequestJsonDepth) {
    cost.prompt_tokens = static_cast<int64_t>(body.size()) / kBytesPerTokenGuess;
    cost.max_new_tokens = max_tokens;
    return cost;
  }
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    cost.max_new_tokens = max_tokens;
    return cost;
  }
  int64_t num_prompts = 1;
  if (chat) {
    if (auto m = j.find("messages"); m != j.end() && m->is_array()) {
      for (const json& msg : *m) {
        cost.prompt_tokens += kChatMessageOverheadTokens;
        if (msg.is_object())
          if (auto c = msg.find("content"); c != msg.end()) cost.prompt_tokens += content_tokens(*c);
      }
    }
  } else if (auto p = j.find("prompt"); p != j.end()) {
    const bool is_list = p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array());
    if (is_list) {
      num_prompts = static_cast<int64_t>(p->size());
      for (const json& one : *p) cost.prompt_tokens += one_prompt_tokens(one);
    } else {
      cost.prompt_tokens = one_prompt_tokens(*p);
    }
  }
  for (const char* field : {"max_completion_tokens", "max_tokens"}) {
    if (auto m = j.find(field); m != j.end() && m->is_number_integer() && m->get<int64_t>() > 0) {
      max_tokens = m->get<int64_t>();
      break;
    }
  }
  int64_t n = 1;
  if (auto f = j.find("n"); f != j.end() && f->is_number_integer()) n = std::clamp<int64_t>(f->get<int64_t>(), 1, 16);
  // Clamp so a silly max_tokens cannot overflow the sums of the pool's counters.
  max_tokens = std::min<int64_t>(max_tokens, int64_t{1} << 30);
  cost.max_new_tokens = max_tokens * n * std::min<int64_t>(num_prompts, 1 << 16);
  if (auto s = j.find("stream"); s != j.end() && s->is_boolean()) cost.stream = s->get<bool>();
  return cost;
}

}  // namespace densa::router
