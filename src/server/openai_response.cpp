#include "server/openai_response.h"

namespace densa::server {

using nlohmann::json;

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json finish_reason_json(ChoiceFinish finish) {
  switch (finish) {
    case ChoiceFinish::kNone: return nullptr;
    case ChoiceFinish::kStop: return "stop";
    case ChoiceFinish::kLength: return "length";
    case ChoiceFinish::kError: return "error";
    case ChoiceFinish::kToolCalls: return "tool_calls";
  }
  return nullptr;
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

namespace {

json bytes_json(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

json logprobs_json(api::ApiKind kind, const Tokenizer& tok, const std::vector<TokenLogprob>& tokens,
                   size_t text_offset_base) {
  if (kind == api::ApiKind::kChat) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
      const std::string piece = tok.token_bytes(t.token);
      json top = json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string alt = tok.token_bytes(id);
        top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", bytes_json(alt)}});
      }
      content.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_json(piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens_out = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       text_offset = json::array();
  size_t offset = text_offset_base;
  for (const TokenLogprob& t : tokens) {
    tokens_out.push_back(tok.token_bytes(t.token));
    token_logprobs.push_back(t.logprob);
    json top = json::object();  // {token text: logprob}; invalid UTF-8 is replaced on dump
    for (const auto& [id, lp] : t.top) top[tok.token_bytes(id)] = lp;
    top_logprobs.push_back(top);
    text_offset.push_back(offset);
    offset += tok.token_bytes(t.token).size();
  }
  return {{"tokens", tokens_out}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
          {"text_offset", text_offset}};
}

json response_json(const ResponseHeader& h, const Tokenizer& tok, const std::vector<ChoiceResult>& choices,
                   bool with_logprobs, const Usage& usage) {
  json out_choices = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    json logprobs = with_logprobs ? logprobs_json(h.kind, tok, c.tokens, 0) : json(nullptr);
    if (h.kind == api::ApiKind::kChat) {
      out_choices.push_back({{"index", i},
                             {"message", {{"role", "assistant"}, {"content", c.text}}},
                             {"logprobs", logprobs},
                             {"finish_reason", finish_reason_json(c.finish)}});
    } else {
      out_choices.push_back(
          {{"index", i}, {"text", c.text}, {"logprobs", logprobs}, {"finish_reason", finish_reason_json(c.finish)}});
    }
  }
  return {{"id", h.id},
          {"object", h.kind == api::ApiKind::kChat ? "chat.completion" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", out_choices},
          {"usage", usage_json(usage)}};
}

json chunk_json(const ResponseHeader& h, int index, const std::string& text, const json& logprobs,
                ChoiceFinish finish, bool first, bool include_usage) {
  json choice;
  if (h.kind == api::ApiKind::kChat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (first || !text.empty()) delta["content"] = text;
    choice = {{"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish_reason_json(finish)}};
  } else {
    choice = {{"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_reason_json(finish)}};
  }
  json out = {{"id", h.id},
              {"object", h.kind == api::ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
              {"created", h.created},
              {"model", h.model},
              {"choices", json::array({choice})}};
  if (include_usage) out["usage"] = nullptr;
  return out;
}

json usage_chunk_json(const ResponseHeader& h, const Usage& usage) {
  return {{"id", h.id},
          {"object", h.kind == api::ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array()},
          {"usage", usage_json(usage)}};
}

}  // namespace densa::server
