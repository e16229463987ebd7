// The public entry points: parser selection, the streaming parser that chains the reasoning
// splitter and the tool engine, and the OpenAI shapes.
#include "text/chat_parse/chat_parse.h"

#include "text/chat_parse/formats.h"

namespace densa::toolparse {

std::unique_ptr<ToolFormat> make_json_tool_format(std::string_view name);
std::unique_ptr<ToolFormat> make_xml_tool_format(std::string_view name);

std::unique_ptr<ToolFormat> make_tool_format(std::string_view name) {
  if (auto f = make_json_tool_format(name)) return f;
  return make_xml_tool_format(name);
}

std::vector<std::string> tool_parser_names() {
  return {"kimi_k2", "glm45", "glm4_moe", "glm46", "glm47", "deepseek_v3", "deepseek_v31",
          "hermes", "qwen3", "qwen25", "qwen3_coder"};
}

std::vector<std::string> reasoning_parser_names() {
  return {"qwen3", "deepseek_r1", "deepseek_v31", "deepseek_v3", "glm45", "glm4_moe", "kimi_k2"};
}

IdSource seeded_ids(uint64_t seed) {
  return [seed](size_t index) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t x = seed ^ (0x9E3779B97F4A7C15ull * (index + 1));
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) {
      x += 0x9E3779B97F4A7C15ull;  // splitmix64
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      id += kAlphabet[z % 62];
    }
    return id;
  };
}

Result<ToolSet> ToolSet::from_openai(const nlohmann::json& tools) {
  ToolSet set;
  if (tools.is_null()) return set;
  if (!tools.is_array()) return invalid_argument("tools must be an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return invalid_argument(where + " is not an object");
    if (t.contains("type") && t["type"] != "function") {
      return unimplemented(where + ".type " + t["type"].dump() + " is not supported (only \"function\")");
    }
    const auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) return invalid_argument(where + " has no \"function\" object");
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      return invalid_argument(where + ".function has no \"name\" string");
    }
    nlohmann::json params = nlohmann::json::object();
    if (const auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
      if (!p->is_object()) return invalid_argument(where + ".function.parameters is not an object");
      params = *p;
    }
    if (!set.schemas_.emplace(name->get<std::string>(), std::move(params)).second) {
      return invalid_argument(where + ": tool \"" + name->get<std::string>() + "\" is declared twice");
    }
  }
  return set;
}

const nlohmann::json* ToolSet::parameters(const std::string& name) const {
  const auto it = schemas_.find(name);
  return it == schemas_.end() ? nullptr : &it->second;
}

nlohmann::json ToolSet::property_type(const std::string& name, const std::string& key) const {
  const nlohmann::json* params = parameters(name);
  if (!params) return nullptr;
  const auto props = params->find("properties");
  if (props == params->end() || !props->is_object()) return nullptr;
  const auto prop = props->find(key);
  if (prop == props->end() || !prop->is_object()) return nullptr;
  const auto type = prop->find("type");
  if (type == prop->end() || !(type->is_string() || type->is_array())) return nullptr;
  return *type;
}

std::string guess_tool_parser(std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<|tool_calls_section_begin|>")) return "kimi_k2";
  if (has("<arg_key>")) return "glm45";
  if (has("<｜tool▁calls▁begin｜>")) return has("```json") ? "deepseek_v3" : "deepseek_v31";
  if (has("<function=") && has("<parameter=")) return "qwen3_coder";
  if (has("<tool_call>")) return has("<think>") ? "qwen3" : "hermes";
  return "";
}

std::string guess_reasoning_parser(std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (!has("<think>") && !has("</think>")) return "";
  if (has("<|tool_calls_section_begin|>")) return "kimi_k2";
  if (has("<arg_key>") || has("[gMASK]")) return "glm45";
  if (has("<｜Assistant｜>")) return has("<｜tool▁calls▁begin｜>") && !has("```json") ? "deepseek_v31" : "deepseek_r1";
  return "qwen3";
}

bool prompt_opens_reasoning(std::string_view prompt) {
  size_t end = prompt.size();
  while (end > 0 && is_space(prompt[end - 1])) --end;
  static constexpr std::string_view kOpen = "<think>";
  return end >= kOpen.size() && prompt.substr(end - kOpen.size(), kOpen.size()) == kOpen;
}

struct ChatStreamParser::Impl {
  std::unique_ptr<ReasoningSplitter> reasoning;
  ToolSet tools;
  std::unique_ptr<ToolEngine> engine;
  bool finished = false;

  std::vector<ChatDelta> run(std::string_view text, bool final, ParsedMessage* msg) {
    std::vector<ChatDelta> out;
    if (reasoning) {
      std::string rest;
      reasoning->feed(text);
      reasoning->advance(final, &out, &rest, msg);
      engine->feed(rest);
    } else {
      engine->feed(text);
    }
    engine->advance(final, &out, msg);
    // Deltas hold back an incomplete character until it completes, so only bytes that can
    // never be UTF-8 (or a character cut off by the end of the text) are replaced here, the
    // same way in every chunking.
    for (ChatDelta& d : out) {
      d.text = sanitize_utf8(d.text);
      d.name = sanitize_utf8(d.name);
      d.id = sanitize_utf8(d.id);
    }
    return out;
  }
};

ChatStreamParser::ChatStreamParser(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatStreamParser::~ChatStreamParser() = default;

Result<std::unique_ptr<ChatStreamParser>> ChatStreamParser::create(ChatParseOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->tools = std::move(options.tools);
  std::unique_ptr<ToolFormat> format;
  if (!options.tool_parser.empty()) {
    format = make_tool_format(options.tool_parser);
    if (!format) return invalid_argument("unknown tool parser '" + options.tool_parser + "'");
    if (!options.ids && options.tool_parser != "kimi_k2") {
      return invalid_argument("tool parser '" + options.tool_parser + "' needs an id source");
    }
  }
  if (!options.reasoning_parser.empty()) {
    ReasoningFormat rf;
    if (!make_reasoning_format(options.reasoning_parser, &rf)) {
      return invalid_argument("unknown reasoning parser '" + options.reasoning_parser + "'");
    }
    impl->reasoning = std::make_unique<ReasoningSplitter>(std::move(rf), options.reasoning_open_in_prompt);
  }
  if (!options.ids) options.ids = seeded_ids(0);  // unused: the format carries its ids
  impl->engine = std::make_unique<ToolEngine>(std::move(format), &impl->tools, std::move(options.ids));
  return std::unique_ptr<ChatStreamParser>(new ChatStreamParser(std::move(impl)));
}

void ChatStreamParser::fold(const std::vector<ChatDelta>& deltas) {
  for (const ChatDelta& d : deltas) {
    switch (d.kind) {
      case ChatDelta::Kind::kContent: message_.content += d.text; break;
      case ChatDelta::Kind::kReasoning: message_.reasoning_content += d.text; break;
      case ChatDelta::Kind::kToolCallStart: message_.tool_calls.push_back({d.id, d.name, "", ""}); break;
      case ChatDelta::Kind::kToolCallArguments: message_.tool_calls[d.tool_index].arguments += d.text; break;
    }
  }
  const auto& errors = impl_->engine->call_errors();
  for (size_t i = 0; i < errors.size() && i < message_.tool_calls.size(); ++i) message_.tool_calls[i].error = errors[i];
}

std::vector<ChatDelta> ChatStreamParser::feed(std::string_view text) {
  if (impl_->finished) {
    message_.issues.push_back("text fed after finish() was ignored");
    return {};
  }
  fed_ += text.size();
  auto out = impl_->run(text, false, &message_);
  fold(out);
  return out;
}

Result<std::vector<ChatDelta>> ChatStreamParser::update(std::string_view full_text) {
  if (full_text.size() < fed_) {
    return invalid_argument("streamed text shrank from " + std::to_string(fed_) + " to " +
                            std::to_string(full_text.size()) + " bytes");
  }
  return feed(full_text.substr(fed_));
}

std::vector<ChatDelta> ChatStreamParser::finish() {
  if (impl_->finished) return {};
  impl_->finished = true;
  auto out = impl_->run({}, true, &message_);
  fold(out);
  return out;
}

Result<ParsedMessage> parse_chat_output(std::string_view text, ChatParseOptions options) {
  DENSA_ASSIGN_OR_RETURN(auto parser, ChatStreamParser::create(std::move(options)));
  parser->feed(text);
  parser->finish();
  return parser->message();
}

nlohmann::json to_openai_message(const ParsedMessage& m) {
  nlohmann::json j = {{"role", "assistant"}};
  j["content"] = m.content.empty() && !m.tool_calls.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.content);
  if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
  if (!m.tool_calls.empty()) {
    nlohmann::json calls = nlohmann::json::array();
    for (const ToolCall& c : m.tool_calls) {
      calls.push_back({{"id", c.id}, {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

nlohmann::json to_openai_delta(const ChatDelta& d) {
  switch (d.kind) {
    case ChatDelta::Kind::kContent: return {{"content", d.text}};
    case ChatDelta::Kind::kReasoning: return {{"reasoning_content", d.text}};
    case ChatDelta::Kind::kToolCallStart:
      return {{"tool_calls", {{{"index", d.tool_index}, {"id", d.id}, {"type", "function"},
                               {"function", {{"name", d.name}, {"arguments", ""}}}}}}};
    case ChatDelta::Kind::kToolCallArguments:
      return {{"tool_calls", {{{"index", d.tool_index}, {"function", {{"arguments", d.text}}}}}}};
  }
  return nlohmann::json::object();
}

}  // namespace densa::toolparse
