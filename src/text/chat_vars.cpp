#include "text/chat_vars.h"

#include <set>
#include <string_view>

namespace densa {
namespace {

using Json = nlohmann::ordered_json;

Result<std::string> flatten_content(const Json& content, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return invalid_argument(where + " must be a string, an array of content parts or null");
  std::string text;
  bool first = true;
  for (size_t k = 0; k < content.size(); ++k) {
    const Json& part = content[k];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return invalid_argument(where + "[" + std::to_string(k) + "] must be an object with a string \"type\"");
    const std::string type = part["type"].get<std::string>();
    if (type != "text")
      return invalid_argument(where + "[" + std::to_string(k) + "]: content part type '" + type +
                              "' is not supported (text only)");
    if (!part.contains("text") || !part["text"].is_string())
      return invalid_argument(where + "[" + std::to_string(k) + "]: a text part needs a string \"text\"");
    if (!first) text += '\n';
    first = false;
    text += part["text"].get<std::string>();
  }
  return text;
}

Result<Json> convert_tool_calls(const Json& calls, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].tool_calls";
  if (!calls.is_array()) return invalid_argument(where + " must be an array");
  Json out = Json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string at = where + "[" + std::to_string(k) + "]";
    const Json& call = calls[k];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      return invalid_argument(at + " must be an object with a \"function\" object");
    const Json& fn = call["function"];
    if (!fn.contains("name") || !fn["name"].is_string()) return invalid_argument(at + ".function.name must be a string");
    if (!fn.contains("arguments") || !fn["arguments"].is_string())
      return invalid_argument(at + ".function.arguments must be a JSON string (as the OpenAI API sends it)");
    Json args = Json::parse(fn["arguments"].get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (args.is_discarded()) return invalid_argument(at + ".function.arguments is not valid JSON");
    Json c = Json::object();
    for (const auto& [key, value] : call.items()) {
      if (key != "function") {
        c[key] = value;
        continue;
      }
      Json f = Json::object();
      for (const auto& [fk, fv] : fn.items()) f[fk] = fk == "arguments" ? args : fv;
      c["function"] = std::move(f);
    }
    out.push_back(std::move(c));
  }
  return out;
}

Result<Json> convert_message(const Json& m, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return invalid_argument(where + " must be an object");
  if (!m.contains("role") || !m["role"].is_string()) return invalid_argument(where + ".role must be a string");
  static const std::set<std::string_view> kKnown = {"role", "content", "name", "tool_calls", "tool_call_id",
                                                    "reasoning_content"};
  static const std::set<std::string_view> kNullable = {"refusal", "audio", "function_call"};
  for (const auto& [key, value] : m.items()) {
    if (kKnown.count(key) || (kNullable.count(key) && value.is_null())) continue;
    return invalid_argument(where + ": field '" + key + "' is not supported");
  }
  const std::string role = m["role"].get<std::string>();
  Json out = Json::object();
  out["role"] = role;
  DENSA_ASSIGN_OR_RETURN(std::string content, flatten_content(m.contains("content") ? m["content"] : Json(), index));
  out["content"] = std::move(content);
  if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    if (role != "assistant") return invalid_argument(where + ": tool_calls are only for assistant messages");
    DENSA_ASSIGN_OR_RETURN(Json calls, convert_tool_calls(m["tool_calls"], index));
    out["tool_calls"] = std::move(calls);
  }
  if (m.contains("tool_call_id") && !m["tool_call_id"].is_null()) {
    if (!m["tool_call_id"].is_string()) return invalid_argument(where + ".tool_call_id must be a string");
    if (role == "tool") out["tool_call_id"] = m["tool_call_id"];
    else return invalid_argument(where + ": tool_call_id is only for tool messages");
  }
  if (m.contains("name") && !m["name"].is_null()) {
    if (!m["name"].is_string()) return invalid_argument(where + ".name must be a string");
    out["name"] = m["name"];
  }
  if (m.contains("reasoning_content") && !m["reasoning_content"].is_null()) {
    if (!m["reasoning_content"].is_string()) return invalid_argument(where + ".reasoning_content must be a string");
    out["reasoning_content"] = m["reasoning_content"];
  }
  return out;
}

Result<Json> convert_tools(const Json& tools) {
  if (!tools.is_array()) return invalid_argument("tools must be an array");
  Json out = Json::array();
  for (size_t k = 0; k < tools.size(); ++k) {
    const std::string at = "tools[" + std::to_string(k) + "]";
    const Json& t = tools[k];
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
      return invalid_argument(at + " must be an object with a \"function\" object");
    if (t.contains("type") && t["type"] != "function")
      return invalid_argument(at + ".type must be \"function\"");
    const Json& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string()) return invalid_argument(at + ".function.name must be a string");
    Json f = Json::object();
    f["name"] = fn["name"];
    f["description"] = fn.contains("description") ? fn["description"] : Json();
    f["parameters"] = fn.contains("parameters") ? fn["parameters"] : Json();
    for (const auto& [key, value] : fn.items())
      if (key != "name" && key != "description" && key != "parameters") f[key] = value;
    Json tool = Json::object();
    tool["type"] = "function";
    tool["function"] = std::move(f);
    out.push_back(std::move(tool));
  }
  return out;
}

}  // namespace

Result<Json> chat_template_vars(const Json& request, const ChatSpecialTokens& tokens) {
  if (!request.is_object()) return invalid_argument("the chat request must be a JSON object");
  if (!request.contains("messages") || !request["messages"].is_array())
    return invalid_argument("the chat request needs a \"messages\" array");
  if (request.contains("continue_final_message") && request["continue_final_message"].is_boolean() &&
      request["continue_final_message"].get<bool>())
    return invalid_argument("continue_final_message is not supported");
  Json vars = Json::object();
  Json messages = Json::array();
  for (size_t i = 0; i < request["messages"].size(); ++i) {
    DENSA_ASSIGN_OR_RETURN(Json m, convert_message(request["messages"][i], i));
    messages.push_back(std::move(m));
  }
  vars["messages"] = std::move(messages);
  if (request.contains("tools") && !request["tools"].is_null()) {
    DENSA_ASSIGN_OR_RETURN(Json tools, convert_tools(request["tools"]));
    vars["tools"] = std::move(tools);
  } else {
    vars["tools"] = nullptr;
  }
  vars["documents"] = request.contains("documents") ? request["documents"] : Json();
  bool add_generation_prompt = true;
  if (request.contains("add_generation_prompt")) {
    if (!request["add_generation_prompt"].is_boolean()) return invalid_argument("add_generation_prompt must be a boolean");
    add_generation_prompt = request["add_generation_prompt"].get<bool>();
  }
  vars["add_generation_prompt"] = add_generation_prompt;
  vars["bos_token"] = tokens.bos_token;
  vars["eos_token"] = tokens.eos_token;
  if (request.contains("chat_template_kwargs") && !request["chat_template_kwargs"].is_null()) {
    const Json& kw = request["chat_template_kwargs"];
    if (!kw.is_object()) return invalid_argument("chat_template_kwargs must be an object");
    for (const auto& [key, value] : kw.items()) vars[key] = value;
  }
  return vars;
}

}  // namespace densa
