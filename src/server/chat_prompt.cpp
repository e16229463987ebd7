#include "server/chat_prompt.h"

#include <fstream>
#include <sstream>

#include "server/chat_template.h"
#include "text/chat_parse/chat_parse.h"
#include "text/chat_vars.h"

namespace densa::server {
namespace {

using ojson = nlohmann::ordered_json;

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open the chat template");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool known(const std::vector<std::string>& names, const std::string& name) {
  for (const std::string& n : names)
    if (n == name) return true;
  return false;
}

// --tool-parser / --reasoning-parser: "none" turns it off, "" guesses from the template.
Result<std::string> pick_parser(const std::string& flag, const std::string& guessed, const std::vector<std::string>& names,
                                const char* what) {
  if (flag == "none") return std::string();
  if (flag.empty()) return guessed;
  if (!known(names, flag)) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    return invalid_argument(std::string("unknown ") + what + " '" + flag + "' (known: " + list + ", none)");
  }
  return flag;
}

}  // namespace

Result<ChatFormat> make_chat_format(const ModelWeights& weights, const ChatFormatOptions& options) {
  ChatFormat f;
  f.bos_token = weights.text_assets.bos_token;
  f.eos_token = weights.text_assets.eos_token;
  f.render_limits = options.render_limits;
  std::string source = weights.text_assets.chat_template;
  f.origin = "the model's chat template";
  if (!options.template_file.empty()) {
    DENSA_ASSIGN_OR_RETURN(source, read_file(options.template_file));
    f.origin = "--chat-template " + options.template_file;
  }
  if (source.empty()) {
    f.origin = "plain fallback (the model ships no chat template)";
  } else {
    Result<jinja::Template> t = jinja::Template::parse(source);
    if (!t.is_ok()) return invalid_argument("chat template (" + f.origin + "): " + t.status().message());
    f.jinja = std::move(t).value();
  }
  DENSA_ASSIGN_OR_RETURN(f.tool_parser, pick_parser(options.tool_parser, toolparse::guess_tool_parser(source),
                                                    toolparse::tool_parser_names(), "tool parser"));
  DENSA_ASSIGN_OR_RETURN(f.reasoning_parser,
                         pick_parser(options.reasoning_parser, toolparse::guess_reasoning_parser(source),
                                     toolparse::reasoning_parser_names(), "reasoning parser"));
  return f;
}

Result<ojson> chat_template_vars(const ChatFormat& format, const api::OpenAiRequest& request) {
  // The request as text/chat_vars.h reads it (vLLM's mapping), rebuilt from the parsed fields
  // with the key order the client sent.
  ojson body = ojson::object();
  ojson messages = ojson::array();
  for (const api::ChatMessage& m : request.messages) messages.push_back(m.raw);
  body["messages"] = std::move(messages);
  if (!request.tools.empty()) body["tools"] = request.tools;
  body["add_generation_prompt"] = request.add_generation_prompt;
  if (!request.chat_template_kwargs.empty()) body["chat_template_kwargs"] = request.chat_template_kwargs;
  return densa::chat_template_vars(body, ChatSpecialTokens{format.bos_token, format.eos_token});
}

Result<RenderedChat> render_chat(const ChatFormat& format, const api::OpenAiRequest& request) {
  RenderedChat out;
  if (!format.jinja) {
    if (!request.tools.empty())
      return invalid_argument("'tools' need a chat template; this model ships none (the plain fallback has no tool format)");
    if (!request.chat_template_kwargs.empty())
      return invalid_argument("'chat_template_kwargs' need a chat template; this model ships none");
    ChatPrompt p = plain_chat_prompt(request.messages);
    out.text = std::move(p.text);
    out.add_special_tokens = true;
    out.stop = std::move(p.stop);
    out.stop_pieces = std::move(p.stop_pieces);
    return out;
  }
  DENSA_ASSIGN_OR_RETURN(ojson vars, chat_template_vars(format, request));
  Result<std::string> text = format.jinja->render(vars, format.render_limits);
  if (!text.is_ok()) return invalid_argument("the chat template failed: " + text.status().message());
  out.text = std::move(text).value();
  out.reasoning_open = !format.reasoning_parser.empty() && toolparse::prompt_opens_reasoning(out.text);
  return out;
}

}  // namespace densa::server
