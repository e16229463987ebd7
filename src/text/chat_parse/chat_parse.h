#pragma once
// Parses a model's generated text in its family's native tool-call and reasoning format back
// into OpenAI chat structures: content, reasoning_content and tool_calls. One parser serves
// both non-streaming (parse_chat_output) and streaming (ChatStreamParser): the non-streaming
// result is the fold of the deltas the streaming parser emits for one chunk holding the whole
// text, and the parsers commit only what no later text can change, so any chunking of the
// same text yields deltas that concatenate to the same message. See CHAT_PARSE.md.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace densa::toolparse {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of the arguments object (OpenAI function.arguments)
  // Empty when the call closed and its arguments are a JSON object. Otherwise what is wrong:
  // truncated, arguments not valid JSON / not an object, unknown tool name. The call is still
  // reported (its deltas may already be sent); the server decides what to do with it.
  std::string error;
};

struct ParsedMessage {
  std::string content;            // text outside tool calls and reasoning
  std::string reasoning_content;  // text between the thinking markers
  std::vector<ToolCall> tool_calls;
  // Problems that did not stop parsing: text kept as content because it could not be a call,
  // reasoning never closed, text inside a tool-call section. Call-level problems are in
  // ToolCall::error.
  std::vector<std::string> issues;
};

// One streaming delta, in emission order.
struct ChatDelta {
  enum class Kind { kContent, kReasoning, kToolCallStart, kToolCallArguments };
  Kind kind = Kind::kContent;
  std::string text;       // content / reasoning text, or an arguments fragment
  size_t tool_index = 0;  // kToolCallStart / kToolCallArguments
  std::string id, name;   // kToolCallStart
};

// Tool ids for calls whose format carries none: id_source(index of the call in the message).
// Injected so a streaming and a non-streaming parse of one request give the same ids.
using IdSource = std::function<std::string(size_t index)>;
// "call_" + 24 letters and digits, a pure function of (seed, index).
IdSource seeded_ids(uint64_t seed);

// The tools of a request (OpenAI "tools" array): parameter schemas by function name. Used to
// type XML arguments (GLM, Qwen3-Coder) and to flag calls of unknown tools.
class ToolSet {
 public:
  // Accepts [{"type":"function","function":{"name":..., "parameters":{...}}}, ...]; anything
  // else is an error naming the offending entry. A null / empty array gives an empty set.
  static Result<ToolSet> from_openai(const nlohmann::json& tools);
  bool empty() const { return schemas_.empty(); }
  bool has(const std::string& name) const { return schemas_.count(name) != 0; }
  // The parameters schema of `name`, or nullptr.
  const nlohmann::json* parameters(const std::string& name) const;
  // The "type" of property `key` of tool `name`: a string, an array of strings, or null when
  // the schema does not say.
  nlohmann::json property_type(const std::string& name, const std::string& key) const;

 private:
  std::map<std::string, nlohmann::json> schemas_;
};

struct ChatParseOptions {
  // Tool-call format by vLLM / SGLang name: "kimi_k2", "glm45" (alias "glm4_moe", "glm46",
  // "glm47"), "deepseek_v3", "deepseek_v31", "hermes", "qwen3" (= hermes format),
  // "qwen3_coder"; "" for none (all text is content).
  std::string tool_parser;
  // Reasoning format: "qwen3", "deepseek_r1", "deepseek_v31" (alias "deepseek_v3"), "glm45",
  // "kimi_k2"; "" for none.
  std::string reasoning_parser;
  // The rendered prompt already opened the reasoning block (e.g. ends with "<think>"), so the
  // output starts inside reasoning. See prompt_opens_reasoning().
  bool reasoning_open_in_prompt = false;
  ToolSet tools;
  IdSource ids;  // required when tool_parser is set and the format carries no ids
};

// Names accepted by ChatParseOptions.
std::vector<std::string> tool_parser_names();
std::vector<std::string> reasoning_parser_names();

// Guesses from a chat template's text; "" when it matches no known format.
std::string guess_tool_parser(std::string_view chat_template);
std::string guess_reasoning_parser(std::string_view chat_template);
// True when the rendered prompt ends inside an open "<think>" block (only whitespace after it).
bool prompt_opens_reasoning(std::string_view rendered_prompt);

class ChatStreamParser {
 public:
  static Result<std::unique_ptr<ChatStreamParser>> create(ChatParseOptions options);
  ~ChatStreamParser();

  // Appends generated text and returns the deltas that became certain.
  std::vector<ChatDelta> feed(std::string_view text);
  // The same, given the whole text generated so far; it must extend the previous text.
  Result<std::vector<ChatDelta>> update(std::string_view full_text);
  // End of generation: commits what was held back and closes open structures.
  std::vector<ChatDelta> finish();
  // The message so far: the fold of every delta returned (plus issues and call errors).
  const ParsedMessage& message() const { return message_; }

 private:
  struct Impl;
  explicit ChatStreamParser(std::unique_ptr<Impl> impl);
  void fold(const std::vector<ChatDelta>& deltas);
  std::unique_ptr<Impl> impl_;
  ParsedMessage message_;
  size_t fed_ = 0;
};

// Non-streaming: the whole generated text at once.
Result<ParsedMessage> parse_chat_output(std::string_view text, ChatParseOptions options);

// OpenAI shapes: the "message" object of a chat completion choice and the "delta" object of
// one streaming chunk (content null when empty and there are tool calls).
nlohmann::json to_openai_message(const ParsedMessage& message);
nlohmann::json to_openai_delta(const ChatDelta& delta);

// Checks `arguments` against a JSON schema subset: type (string, number, integer, boolean,
// object, array, null, or a list), properties, required, additionalProperties (bool or
// schema), items, enum, const, minimum / maximum / exclusiveMinimum / exclusiveMaximum,
// minLength / maxLength, minItems / maxItems, anyOf / oneOf / allOf. Annotations (title,
// description, default, examples, format, $schema, $id, $comment, deprecated, readOnly,
// writeOnly) are not constraints. Any other keyword gives an unimplemented error naming it
// and its location; a violation gives invalid_argument naming the JSON pointer and the rule.
Status validate_arguments(const nlohmann::json& arguments, const nlohmann::json& schema);
// Parses call.arguments and validates it against the tool's parameters in `tools`.
Status validate_tool_call(const ToolCall& call, const ToolSet& tools);

}  // namespace densa::toolparse
