// The chat-output parsers on hand-written model output: malformed calls, reasoning edge cases,
// held-back markers, options, and the schema-subset argument check. The defined results are
// documented in src/text/chat_parse/CHAT_PARSE.md.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "text/chat_parse/chat_parse.h"
#include "text/chat_parse/stream_check.h"

namespace densa::toolparse {
namespace {

using nlohmann::json;
using testing::expect_all_chunkings_match;

ChatParseOptions opts(const std::string& tool, const std::string& reasoning = "", bool open = false) {
  ChatParseOptions o;
  o.tool_parser = tool;
  o.reasoning_parser = reasoning;
  o.reasoning_open_in_prompt = open;
  o.ids = seeded_ids(7);
  auto ts = ToolSet::from_openai(json::parse(R"([
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
      "properties": {"tz": {"type": "string"}, "n": {"type": "integer"}}}}}])"));
  EXPECT_TRUE(ts.is_ok());
  o.tools = std::move(*ts);
  return o;
}

ParsedMessage parse(const std::string& text, const ChatParseOptions& o) {
  auto m = parse_chat_output(text, o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  expect_all_chunkings_match(o, text, {}, text);
  return m.is_ok() ? *m : ParsedMessage{};
}

TEST(ChatParseMalformed, TruncatedKimiCallKeepsItsArgumentsAndSaysSo) {
  const auto m = parse("Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0"
                       "<|tool_call_argument_begin|>{\"tz\": \"Zü",
                       opts("kimi_k2"));
  EXPECT_EQ(m.content, "Sure.");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].id, "functions.get_time:0");
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"tz\": \"Zü");
  EXPECT_NE(m.tool_calls[0].error.find("truncated"), std::string::npos) << m.tool_calls[0].error;
}

TEST(ChatParseMalformed, InvalidJsonArgumentsAreFlagged) {
  for (const auto& [parser, text] : std::vector<std::pair<std::string, std::string>>{
           {"hermes", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": }}\n</tool_call>"},
           {"deepseek_v31", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{tz: 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
           {"kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>[1]<|tool_call_end|><|tool_calls_section_end|>"}}) {
    const auto m = parse(text, opts(parser));
    ASSERT_EQ(m.tool_calls.size(), 1u) << parser;
    EXPECT_EQ(m.tool_calls[0].name, "get_time");
    EXPECT_NE(m.tool_calls[0].error.find("arguments are not"), std::string::npos) << parser << ": " << m.tool_calls[0].error;
    EXPECT_EQ(m.content, "");
  }
}

TEST(ChatParseMalformed, UnknownToolIsFlaggedButKept) {
  const auto m = parse("<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", opts("hermes"));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "rm_rf");
  EXPECT_EQ(m.tool_calls[0].error, "unknown tool 'rm_rf'");
  const Status s = validate_tool_call(m.tool_calls[0], opts("hermes").tools);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(ChatParseMalformed, BlocksThatCannotBeCallsStayContentVerbatim) {
  for (const auto& [parser, text] : std::vector<std::pair<std::string, std::string>>{
           {"hermes", "Use <tool_call>\nhello\n</tool_call> like this."},
           {"hermes", "Ends in <tool_call>\n{\"name\": \"get_ti"},
           {"glm45", "Text <tool_call>get_ti"},
           {"qwen3_coder", "See <tool_call>\nnot a function\n</tool_call>"},
           {"hermes", "Partial marker at the end <tool_ca"}}) {
    const auto m = parse(text, opts(parser));
    EXPECT_EQ(m.content, text) << parser;
    EXPECT_TRUE(m.tool_calls.empty()) << parser;
    if (text.find("<tool_call>") != std::string::npos) {
      EXPECT_EQ(m.issues.size(), 1u) << text;
    }
  }
}

TEST(ChatParseMalformed, HermesObjectWithNameNotFirstIsParsedWhole) {
  const auto m = parse("<tool_call>{\"arguments\": {\"tz\": \"UTC\"}, \"name\": \"get_time\"}</tool_call>", opts("hermes"));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "get_time");
  EXPECT_EQ(json::parse(m.tool_calls[0].arguments), json({{"tz", "UTC"}}));
  EXPECT_EQ(m.tool_calls[0].error, "");
}

TEST(ChatParseMalformed, HermesObjectsWithoutStreamableArguments) {
  const auto none = parse("<tool_call>{\"name\": \"get_time\"}</tool_call>", opts("hermes"));
  ASSERT_EQ(none.tool_calls.size(), 1u);
  EXPECT_EQ(none.tool_calls[0].arguments, "{}");
  EXPECT_EQ(none.tool_calls[0].error, "");
  const auto other = parse("<tool_call>{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}</tool_call>", opts("hermes"));
  ASSERT_EQ(other.tool_calls.size(), 1u);
  EXPECT_EQ(other.tool_calls[0].error, "tool call has no \"arguments\"");
  const auto extra = parse("<tool_call>{\"name\": \"get_time\", \"arguments\": {}, \"x\": 1}</tool_call>", opts("hermes"));
  ASSERT_EQ(extra.tool_calls.size(), 1u);
  EXPECT_EQ(extra.tool_calls[0].arguments, "{}");
  EXPECT_EQ(extra.tool_calls[0].error, "unexpected text after the call's arguments");
}

TEST(ChatParseStream, SameShapedCallsInARowAreEachScannedAfresh) {
  // Both argument objects start at the same offset of their blocks.
  const auto m = parse("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>\n"
                       "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\", \"n\": 2}}\n</tool_call>",
                       opts("hermes"));
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(json::parse(m.tool_calls[0].arguments), json({{"tz", "UTC"}}));
  EXPECT_EQ(json::parse(m.tool_calls[1].arguments), json({{"tz", "CET"}, {"n", 2}}));
  EXPECT_EQ(m.content, "");
}

TEST(ChatParseMalformed, HermesCallClosedByEndOfTextIsAccepted) {
  const auto m = parse("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"</tool_call>\"}}", opts("hermes"));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(json::parse(m.tool_calls[0].arguments), json({{"tz", "</tool_call>"}}));
  EXPECT_EQ(m.tool_calls[0].error, "");
}

TEST(ChatParseMalformed, XmlArgumentsTypedBySchema) {
  // tz is a string even when it looks like a number; n is an integer; an undeclared key that
  // parses as JSON is JSON; a value for an integer that is not JSON stays a string.
  const auto m = parse("<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>123</arg_value>\n"
                       "<arg_key>n</arg_key>\n<arg_value>5</arg_value>\n<arg_key>x</arg_key><arg_value>[1, 2]</arg_value>"
                       "<arg_key>n2</arg_key><arg_value>five</arg_value></tool_call>",
                       opts("glm45"));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(json::parse(m.tool_calls[0].arguments), json({{"tz", "123"}, {"n", 5}, {"x", {1, 2}}, {"n2", "five"}}));
  const auto c = parse("<tool_call>\n<function=get_time>\n<parameter=n>\n7\n</parameter>\n</function>\n</tool_call>", opts("qwen3_coder"));
  ASSERT_EQ(c.tool_calls.size(), 1u);
  EXPECT_EQ(json::parse(c.tool_calls[0].arguments), json({{"n", 7}}));
}

TEST(ChatParseMalformed, XmlCallsWithBrokenStructureAreFlagged) {
  const auto m = parse("<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UT", opts("glm45"));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_NE(m.tool_calls[0].error, "");
  EXPECT_EQ(json::parse(m.tool_calls[0].arguments, nullptr, false).is_discarded(), true);  // streamed as it stood
  const auto j = parse("<tool_call>get_time\nstray words\n</tool_call>", opts("glm45"));
  ASSERT_EQ(j.tool_calls.size(), 1u);
  EXPECT_NE(j.tool_calls[0].error.find("unexpected text"), std::string::npos) << j.tool_calls[0].error;
  EXPECT_EQ(j.tool_calls[0].arguments, "{}");
}

TEST(ChatParseMalformed, TextInsideASectionIsContentAndNoted) {
  const auto m = parse("<|tool_calls_section_begin|>oops<|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{}"
                       "<|tool_call_end|><|tool_calls_section_end|> done",
                       opts("kimi_k2"));
  EXPECT_EQ(m.content, "oopsdone");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.issues.size(), 1u);
}

// Whitespace inside section text that is not a call is that text's: a chunk ending inside the
// text once made the next step skip the whitespace after it as if it stood between calls, so
// the streamed content lost spaces the whole parse kept (parse() checks every split point).
TEST(ChatParseMalformed, WhitespaceInsideSectionTextSurvivesEveryChunking) {
  const auto m = parse("<think>Check.</think>\n\nSure.<|tool_calls_section_begin|> <|tool_cal<|x|>{\"tz\": \"UTC\"}"
                       "<|tool_call_end|> <|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{}"
                       "<|tool_call_end|><|tool_calls_section_end|>",
                       opts("kimi_k2", "kimi_k2"));
  EXPECT_EQ(m.reasoning_content, "Check.");
  EXPECT_EQ(m.content, "Sure.<|tool_cal<|x|>{\"tz\": \"UTC\"}<|tool_call_end|>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].error, "");
}

// DeepSeek V3 fences its arguments; a call whose closing fence is missing ends at its own
// call-end marker. The whole parse once ran on to a later call's fenced end (swallowing that
// call), while a stream that had not yet seen the later call stopped at the first marker.
TEST(ChatParseMalformed, DeepSeekV3CallWithoutClosingFenceEndsAtItsOwnMarker) {
  const auto m = parse("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n"
                       "{\"tz\": \"UTC\"}\nx```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                       "get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                       opts("deepseek_v3"));
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"tz\": \"UTC\"}\nx```");
  EXPECT_NE(m.tool_calls[0].error, "");  // not JSON
  EXPECT_EQ(m.tool_calls[1].arguments, "{}");
  EXPECT_EQ(m.tool_calls[1].error, "");
}

TEST(ChatParseReasoning, Qwen3ThinkBlockAtTheStart) {
  const auto m = parse("<think>\nStep one.\n</think>\n\nThe answer.", opts("qwen3", "qwen3"));
  EXPECT_EQ(m.reasoning_content, "Step one.");
  EXPECT_EQ(m.content, "The answer.");
}

TEST(ChatParseReasoning, NoThinkBlockMeansAllContent) {
  const auto m = parse("Plain answer with </think> inside.", opts("", "qwen3"));
  EXPECT_EQ(m.reasoning_content, "");
  EXPECT_EQ(m.content, "Plain answer with </think> inside.");
}

TEST(ChatParseReasoning, PromptOpenedReasoning) {
  const auto m = parse("I think.</think>Answer.", opts("", "deepseek_r1", true));
  EXPECT_EQ(m.reasoning_content, "I think.");
  EXPECT_EQ(m.content, "Answer.");
  const auto t = parse("Still thinking when the tokens ran out", opts("", "deepseek_r1", true));
  EXPECT_EQ(t.reasoning_content, "Still thinking when the tokens ran out");
  EXPECT_EQ(t.content, "");
  ASSERT_EQ(t.issues.size(), 1u);
  EXPECT_NE(t.issues[0].find("not closed"), std::string::npos);
}

TEST(ChatParseReasoning, ThinkingOffPromptClosedTheBlock) {
  EXPECT_TRUE(prompt_opens_reasoning("<｜Assistant｜><think>"));
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<｜Assistant｜><think></think>"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  const auto m = parse("Direct answer.", opts("", "deepseek_v31", false));
  EXPECT_EQ(m.content, "Direct answer.");
  EXPECT_EQ(m.reasoning_content, "");
}

TEST(ChatParseReasoning, KimiReasoningEndsAtToolSection) {
  const auto m = parse("<think>Need the time.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0"
                       "<|tool_call_argument_begin|>{\"tz\": \"UTC\"}<|tool_call_end|><|tool_calls_section_end|>",
                       opts("kimi_k2", "kimi_k2"));
  EXPECT_EQ(m.reasoning_content, "Need the time.");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].error, "");
}

TEST(ChatParseStream, PartialMarkersAreHeldBackUntilDecided) {
  auto p = ChatStreamParser::create(opts("hermes"));
  ASSERT_TRUE(p.is_ok());
  std::string content;
  for (const auto& d : (*p)->feed("Hi <tool_")) content += d.text;
  EXPECT_EQ(content, "Hi");  // the space waits too: it goes if a call follows
  for (const auto& d : (*p)->feed("x")) content += d.text;
  EXPECT_EQ(content, "Hi <tool_x");
  auto shrink = (*p)->update("Hi");
  EXPECT_EQ(shrink.status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatParseStream, ToolCallDeltasComeNameFirstThenArguments) {
  auto p = ChatStreamParser::create(opts("hermes"));
  ASSERT_TRUE(p.is_ok());
  auto d1 = (*p)->feed("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"U");
  ASSERT_EQ(d1.size(), 2u);
  EXPECT_EQ(d1[0].kind, ChatDelta::Kind::kToolCallStart);
  EXPECT_EQ(d1[0].name, "get_time");
  EXPECT_EQ(d1[0].id, seeded_ids(7)(0));
  EXPECT_EQ(to_openai_delta(d1[0]), json::parse(R"({"tool_calls": [{"index": 0, "id": ")" + d1[0].id +
                                                R"(", "type": "function", "function": {"name": "get_time", "arguments": ""}}]})"));
  EXPECT_EQ(d1[1].text, "{\"tz\": \"U");
  (*p)->feed("TC\"}}\n</tool_call>");
  (*p)->finish();
  const json msg = to_openai_message((*p)->message());
  EXPECT_EQ(msg["content"], nullptr);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], "{\"tz\": \"UTC\"}");
}

TEST(ChatParseStream, IdsAreInjectedAndDeterministic) {
  EXPECT_EQ(seeded_ids(1)(0), seeded_ids(1)(0));
  EXPECT_NE(seeded_ids(1)(0), seeded_ids(1)(1));
  EXPECT_NE(seeded_ids(1)(0), seeded_ids(2)(0));
  EXPECT_EQ(seeded_ids(1)(0).size(), 29u);
  EXPECT_EQ(seeded_ids(1)(0).substr(0, 5), "call_");
  ChatParseOptions o = opts("hermes");
  o.ids = [](size_t i) { return "mine-" + std::to_string(i); };
  auto m = parse_chat_output("<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>", o);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->tool_calls.at(0).id, "mine-0");
}

TEST(ChatParseOptionsTest, BadOptionsAreErrors) {
  ChatParseOptions o;
  o.tool_parser = "llama3_json";
  EXPECT_EQ(ChatStreamParser::create(o).status().code(), StatusCode::kInvalidArgument);
  o.tool_parser = "hermes";
  EXPECT_EQ(ChatStreamParser::create(o).status().code(), StatusCode::kInvalidArgument);  // no id source
  o.tool_parser = "";
  o.reasoning_parser = "nope";
  EXPECT_EQ(ChatStreamParser::create(o).status().code(), StatusCode::kInvalidArgument);
  for (const auto& n : tool_parser_names()) {
    ChatParseOptions ok;
    ok.tool_parser = n;
    ok.ids = seeded_ids(0);
    EXPECT_TRUE(ChatStreamParser::create(ok).is_ok()) << n;
  }
  for (const auto& n : reasoning_parser_names()) {
    ChatParseOptions ok;
    ok.reasoning_parser = n;
    EXPECT_TRUE(ChatStreamParser::create(ok).is_ok()) << n;
  }
  EXPECT_FALSE(ToolSet::from_openai(json::object()).is_ok());
  EXPECT_FALSE(ToolSet::from_openai(json::parse(R"([{"type": "function"}])")).is_ok());
  EXPECT_EQ(ToolSet::from_openai(json::parse(R"([{"type": "retrieval", "function": {"name": "x"}}])")).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_FALSE(ToolSet::from_openai(json::parse(
      R"([{"function": {"name": "x"}}, {"function": {"name": "x"}}])")).is_ok());
  EXPECT_TRUE(ToolSet::from_openai(nullptr).is_ok());
}

TEST(ChatParseUtf8, SplitCharactersNeverReachADelta) {
  expect_all_chunkings_match(opts("glm45"), "Grüße 東京 🕐 <tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>東京 🕐</arg_value>\n</tool_call>", {}, "utf8");
}

TEST(ChatParseUtf8, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  // A lone continuation byte, an invalid lead, a cut-off character before ASCII, an overlong
  // form, and a character cut off by the end of the text.
  const std::string text = std::string("a\x80" "b\xff" "c\xe6\x9d" "d\xc0\xaf" "e <tool_call>get_time\n</tool_call>\xe6\x9d");
  const auto m = parse(text, opts("glm45"));
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(m.content, "a" + r + "b" + r + "c" + r + r + "d" + r + r + "e" + r + r);
  EXPECT_EQ(m.tool_calls.size(), 1u);
}

// The schema subset, each rule both ways (expected outcomes from the JSON Schema spec, and
// cross-checked with ajv below).
const json& rule_schema() {
  static const json schema = json::parse(R"({
    "type": "object", "description": "annotation only",
    "properties": {
      "s": {"type": "string", "minLength": 2, "maxLength": 3},
      "i": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10},
      "e": {"enum": ["a", "b"]},
      "arr": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2},
      "u": {"type": ["string", "null"]},
      "o": {"type": "object", "properties": {"k": {"const": 1}}, "additionalProperties": false},
      "any": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
      "one": {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    },
    "required": ["s"],
    "additionalProperties": {"type": "boolean"}
  })");
  return schema;
}

const std::vector<const char*> kGood = {
    R"({"s": "ab"})",
    R"({"s": "äöü", "i": 9, "e": "b", "arr": [1.5], "u": null, "o": {"k": 1}, "any": true, "one": 1.5, "extra": false})",
    R"({"s": "ab", "i": 2.0})"};  // 2.0 is an integer in JSON Schema
const std::vector<const char*> kBad = {
    R"({})", R"({"s": 1})", R"({"s": "a"})", R"({"s": "abcd"})", R"({"s": "ab", "i": -1})",
    R"({"s": "ab", "i": 10})", R"({"s": "ab", "i": 1.5})", R"({"s": "ab", "e": "c"})",
    R"({"s": "ab", "arr": []})", R"({"s": "ab", "arr": [1, 2, 3]})", R"({"s": "ab", "arr": ["x"]})",
    R"({"s": "ab", "u": 3})", R"({"s": "ab", "o": {"k": 2}})", R"({"s": "ab", "o": {"z": 1}})",
    R"({"s": "ab", "any": 3})", R"({"s": "ab", "one": 1})", R"({"s": "ab", "extra": "no"})", R"([1])"};

TEST(ValidateArguments, EachRuleAcceptsAndRejects) {
  for (const char* good : kGood) EXPECT_TRUE(validate_arguments(json::parse(good), rule_schema()).is_ok()) << good;
  for (const char* bad : kBad) {
    const Status s = validate_arguments(json::parse(bad), rule_schema());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_FALSE(s.message().empty()) << bad;
  }
  EXPECT_NE(validate_arguments(json::parse(R"({"s": "ab", "o": {"z": 1}})"), rule_schema()).message().find("/o"),
            std::string::npos);
  const json pattern = json::parse(R"({"properties": {"p": {"pattern": "x"}}})");
  EXPECT_TRUE(validate_arguments(json::object(), pattern).is_ok());  // only a checked value meets the keyword
  const Status refused = validate_arguments(json::parse(R"({"p": "x"})"), pattern);
  EXPECT_EQ(refused.code(), StatusCode::kUnimplemented);
  EXPECT_NE(refused.message().find("pattern"), std::string::npos);
}

TEST(ValidateArguments, AgreesWithAjv) {
  json instances = json::array();
  for (const char* g : kGood) instances.push_back(json::parse(g));
  for (const char* b : kBad) instances.push_back(json::parse(b));
  const std::string in = (std::filesystem::temp_directory_path() /
                          ("densa_ajv_" + std::to_string(::getpid()) + ".json")).string();
  std::ofstream(in) << json({{"schema", rule_schema()}, {"instances", instances}}).dump();
  const std::string cmd = "node " DENSA_SOURCE_DIR "/tests/text/chat_parse/ajv_verdicts.mjs " DENSA_ORACLES_DIR " < " + in + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int rc = pclose(pipe);
  std::filesystem::remove(in);
  ASSERT_EQ(rc, 0) << "ajv oracle failed (is build/oracles installed? ninja densa_oracles): " << out;
  const json verdicts = json::parse(out, nullptr, false);
  ASSERT_TRUE(verdicts.is_array() && verdicts.size() == instances.size()) << out;
  for (size_t i = 0; i < instances.size(); ++i) {
    EXPECT_EQ(validate_arguments(instances[i], rule_schema()).is_ok(), verdicts[i].get<bool>()) << instances[i].dump();
  }
}

}  // namespace
}  // namespace densa::toolparse
