// The tool-call and reasoning stream parsers (text/chat_parse) fed arbitrary model output:
// byte 0 picks the tool parser (or none), byte 1 the reasoning parser (or none; bit 7:
// reasoning opened by the prompt), byte 2 seeds the chunk sizes, the rest is the generated
// text. Checks the promise of chat_parse.h: the text fed in any chunks (through feed() and
// through update() with the growing whole) yields the same message as parse_chat_output on
// the whole text - content, reasoning, every call's id, name, arguments and error - and the
// message is the fold of the deltas. Calls are validated against the request's tools and
// every message and delta converts to OpenAI JSON, without fault.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "text/chat_parse/chat_parse.h"

namespace {

using namespace densa::toolparse;

const ToolSet& tools() {
  static const ToolSet t = [] {
    auto j = nlohmann::json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                       "units": {"enum": ["c", "f"]}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
        "properties": {"query": {"type": "string", "maxLength": 64}, "tags": {"type": "array", "items": {"type": "string"}},
                       "opts": {"type": "object", "additionalProperties": {"type": ["number", "boolean", "null"]}}}}}}])");
    auto r = ToolSet::from_openai(j);
    FUZZ_ASSERT(r.is_ok());
    return *r;
  }();
  return t;
}

ChatParseOptions options(uint8_t tool, uint8_t reasoning) {
  static const std::vector<std::string> tool_names = tool_parser_names();
  static const std::vector<std::string> reasoning_names = reasoning_parser_names();
  ChatParseOptions o;
  const size_t ti = tool % (tool_names.size() + 1);
  const size_t ri = (reasoning & 0x7f) % (reasoning_names.size() + 1);
  o.tool_parser = ti < tool_names.size() ? tool_names[ti] : "";
  o.reasoning_parser = ri < reasoning_names.size() ? reasoning_names[ri] : "";
  o.reasoning_open_in_prompt = (reasoning & 0x80) != 0;
  o.tools = tools();
  o.ids = seeded_ids(42);
  return o;
}

void expect_same(const ParsedMessage& a, const ParsedMessage& b) {
  FUZZ_ASSERT(a.content == b.content);
  FUZZ_ASSERT(a.reasoning_content == b.reasoning_content);
  FUZZ_ASSERT(a.tool_calls.size() == b.tool_calls.size());
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    FUZZ_ASSERT(a.tool_calls[i].id == b.tool_calls[i].id);
    FUZZ_ASSERT(a.tool_calls[i].name == b.tool_calls[i].name);
    FUZZ_ASSERT(a.tool_calls[i].arguments == b.tool_calls[i].arguments);
    FUZZ_ASSERT(a.tool_calls[i].error == b.tool_calls[i].error);
  }
}

// The message folded from the deltas alone (ChatStreamParser::message() adds errors/issues).
struct Fold {
  std::string content, reasoning;
  std::vector<std::string> names, ids, args;
  void add(const std::vector<ChatDelta>& deltas) {
    for (const ChatDelta& d : deltas) {
      (void)to_openai_delta(d).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      switch (d.kind) {
        case ChatDelta::Kind::kContent: content += d.text; break;
        case ChatDelta::Kind::kReasoning: reasoning += d.text; break;
        case ChatDelta::Kind::kToolCallStart:
          FUZZ_ASSERT(d.tool_index == names.size());
          names.push_back(d.name);
          ids.push_back(d.id);
          args.emplace_back();
          break;
        case ChatDelta::Kind::kToolCallArguments:
          FUZZ_ASSERT(d.tool_index < args.size());
          args[d.tool_index] += d.text;
          break;
      }
    }
  }
  void expect_is(const ParsedMessage& m) const {
    FUZZ_ASSERT(m.content == content && m.reasoning_content == reasoning);
    FUZZ_ASSERT(m.tool_calls.size() == names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      FUZZ_ASSERT(m.tool_calls[i].name == names[i] && m.tool_calls[i].id == ids[i] && m.tool_calls[i].arguments == args[i]);
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 3), size - 3);

  auto whole = parse_chat_output(text, options(data[0], data[1]));
  FUZZ_ASSERT(whole.is_ok());
  (void)to_openai_message(*whole).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (const ToolCall& c : whole->tool_calls) (void)validate_tool_call(c, tools());

  // feed() in chunks of 1..16 bytes.
  auto fed = ChatStreamParser::create(options(data[0], data[1]));
  FUZZ_ASSERT(fed.is_ok());
  Fold fold;
  uint32_t seed = data[2];
  for (size_t pos = 0; pos < text.size();) {
    seed = seed * 1103515245u + 12345u;
    const size_t n = std::min<size_t>(text.size() - pos, 1 + (seed >> 16) % 16);
    fold.add((*fed)->feed(text.substr(pos, n)));
    pos += n;
  }
  fold.add((*fed)->finish());
  fold.expect_is((*fed)->message());
  expect_same((*fed)->message(), *whole);

  // update() with the growing whole text, in other chunk sizes.
  auto updated = ChatStreamParser::create(options(data[0], data[1]));
  FUZZ_ASSERT(updated.is_ok());
  for (size_t end = 0; end < text.size();) {
    seed = seed * 1103515245u + 12345u;
    end = std::min<size_t>(text.size(), end + 1 + (seed >> 16) % 7);
    FUZZ_ASSERT((*updated)->update(text.substr(0, end)).is_ok());
  }
  (*updated)->finish();
  expect_same((*updated)->message(), *whole);
  return 0;
}
