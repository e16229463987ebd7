// Round trip through the real chat templates: render an assistant turn holding tool calls
// with each family's published template (Python Jinja2 in Hugging Face's environment,
// tests/text/chat_parse/render_turn.py), feed the rendered turn back as model output, and
// expect the calls and content that were rendered; then stream it in every chunking.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "test_util.h"
#include "text/chat_parse/chat_parse.h"
#include "text/chat_parse/stream_check.h"

namespace densa::toolparse {
namespace {

using nlohmann::json;
using testing::expect_all_chunkings_match;

std::filesystem::path templates_dir() { return densa::testing::models_dir().parent_path() / "templates"; }

struct Rendered {
  std::string prompt, full;
};

// Renders with /usr/bin/python3 (Debian's python3-jinja2); a failure is a test failure.
Rendered render(const std::string& template_file, const json& messages, const json& tools, const json& kwargs) {
  const json req = {{"template", (templates_dir() / template_file).string()},
                    {"messages", messages}, {"tools", tools}, {"kwargs", kwargs}};
  const auto dir = std::filesystem::temp_directory_path();
  const auto in = dir / ("densa_render_" + std::to_string(::getpid()) + ".json");
  std::ofstream(in) << req.dump();
  const std::string cmd = "/usr/bin/python3 " DENSA_SOURCE_DIR "/tests/text/chat_parse/render_turn.py < " +
                          in.string() + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  size_t n;
  while (pipe && (n = fread(buf, 1, sizeof buf, pipe.get())) > 0) out.append(buf, n);
  const int rc = pipe ? pclose(pipe.release()) : -1;
  std::filesystem::remove(in);
  EXPECT_EQ(rc, 0) << "render_turn.py failed: " << out;
  const json r = json::parse(out, nullptr, false);
  EXPECT_TRUE(r.is_object()) << out;
  if (!r.is_object()) return {};
  return {r["prompt"], r["full"]};
}

const json& tools() {
  static const json t = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City."},
        "days": {"type": "integer", "description": "Days."},
        "opts": {"type": "object", "description": "Options.", "properties": {
          "unit": {"type": "string", "enum": ["c", "f"]},
          "tags": {"type": "array", "items": {"type": "string"}}}}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Time.",
      "parameters": {"type": "object", "properties": {"tz": {"type": "string", "description": "Zone."}}}}},
    {"type": "function", "function": {"name": "set_flags", "description": "Flags.",
      "parameters": {"type": "object", "properties": {
        "enabled": {"type": "boolean", "description": "On."},
        "ratio": {"type": "number", "description": "Ratio."},
        "items": {"type": "array", "description": "Items.", "items": {"type": "object"}},
        "note": {"type": "string", "description": "Note."}},
        "additionalProperties": false}}},
    {"type": "function", "function": {"name": "list_files", "description": "Files.",
      "parameters": {"type": "object", "properties": {}}}}
  ])");
  return t;
}

struct Case {
  std::string label;
  std::string content;  // the assistant message content
  std::vector<std::pair<std::string, json>> calls;
};

std::vector<Case> cases() {
  return {
      {"single", "Let me check.",
       {{"get_weather", {{"city", "Zürich"}, {"days", 3}, {"opts", {{"unit", "c"}, {"tags", {"a", "b"}}}}}}}},
      {"parallel", "",
       {{"get_weather", {{"city", "São Paulo"}, {"days", 1}}}, {"get_time", {{"tz", "東京/日本 🕐"}}}}},
      {"types", "Setting flags.",
       {{"set_flags", {{"enabled", true}, {"ratio", 0.25}, {"items", json::array({{{"k", 1}}, {{"k", "v"}}})},
                       {"note", "line 1\nline \"2\" \\ <b>"}}},
        {"list_files", json::object()}}},
  };
}

struct Family {
  std::string template_file, tool_parser, reasoning_parser;
  std::string end_marker;   // ends the assistant turn ("" when the turn runs to the end)
  bool args_as_string;      // the template concatenates arguments as text
  bool content_null;        // the template renders calls only when content is null
  bool renders_content;     // the template writes the content of a message with calls
  bool own_ids;             // the format carries ids functions.NAME:IDX
  json kwargs = json::object();
  std::vector<std::string> specials;  // marker tokens, for token-like chunkings
  // DeepSeek V3's template writes neither <｜tool▁calls▁end｜> nor <｜end▁of▁sentence｜> after a
  // lone call (it emits them only after a second one), so its single-call turn runs to the end.
  bool end_missing_after_one_call = false;
};

std::vector<Family> families() {
  const json bos = {{"bos_token", "<BOS>"}, {"eos_token", "<EOS>"}};
  return {
      {"moonshotai-Kimi-K2.jinja", "kimi_k2", "", "<|im_end|>", false, false, true, true, bos,
       {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>", "<|tool_call_end|>"}},
      {"GLM-4.6.jinja", "glm45", "glm45", "", false, false, true, false, bos,
       {"<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"}},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek_v31", "deepseek_v31", "<｜end▁of▁sentence｜>", false, false,
       true, false, bos,
       {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"}},
      {"deepseek-ai-DeepSeek-V3.jinja", "deepseek_v3", "", "<｜end▁of▁sentence｜>", true, true, false, false, bos,
       {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"},
       true},
      {"Qwen-Qwen3-0.6B.jinja", "qwen3", "qwen3", "<|im_end|>", false, false, true, false, bos,
       {"<think>", "</think>", "<tool_call>", "</tool_call>"}},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes", "", "<|im_end|>", false, false, false, false,
       bos, {"<tool_call>", "</tool_call>"}},
      {"Qwen3-Coder.jinja", "qwen3_coder", "", "<|im_end|>", false, false, true, false, bos,
       {"<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>"}},
  };
}

json assistant_message(const Family& f, const Case& c, const std::string& reasoning = "") {
  json calls = json::array();
  for (size_t i = 0; i < c.calls.size(); ++i) {
    const json& args = c.calls[i].second;
    calls.push_back({{"id", "call_" + std::to_string(i)}, {"type", "function"},
                     {"function", {{"name", c.calls[i].first},
                                   {"arguments", f.args_as_string ? json(args.dump()) : args}}}});
  }
  json m = {{"role", "assistant"}, {"content", f.content_null ? json(nullptr) : json(c.content)},
            {"tool_calls", calls}};
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  return m;
}

// The assistant turn as the model would have generated it after the prompt.
std::string generated_turn(const Family& f, const Rendered& r, size_t calls) {
  EXPECT_EQ(r.full.substr(0, r.prompt.size()), r.prompt) << f.template_file << ": the prompt is not a prefix";
  std::string turn = r.full.substr(std::min(r.prompt.size(), r.full.size()));
  if (!f.end_marker.empty()) {
    const size_t e = turn.find(f.end_marker);
    if (e == std::string::npos && f.end_missing_after_one_call && calls == 1) return turn;
    EXPECT_NE(e, std::string::npos) << f.template_file << ": no end-of-turn marker in " << turn;
    turn = turn.substr(0, e);
  }
  return turn;
}

ChatParseOptions options_for(const Family& f, const Rendered& r) {
  ChatParseOptions o;
  o.tool_parser = f.tool_parser;
  o.reasoning_parser = f.reasoning_parser;
  o.reasoning_open_in_prompt = prompt_opens_reasoning(r.prompt);
  auto ts = ToolSet::from_openai(tools());
  EXPECT_TRUE(ts.is_ok()) << ts.status().to_string();
  o.tools = std::move(*ts);
  o.ids = seeded_ids(42);
  return o;
}

void expect_calls(const Family& f, const Case& c, const ParsedMessage& m, const ToolSet& ts, const std::string& label) {
  ASSERT_EQ(m.tool_calls.size(), c.calls.size()) << label;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    const ToolCall& call = m.tool_calls[i];
    EXPECT_EQ(call.name, c.calls[i].first) << label;
    EXPECT_EQ(call.error, "") << label;
    const json args = json::parse(call.arguments, nullptr, false);
    EXPECT_EQ(args, c.calls[i].second) << label << " arguments text: " << call.arguments;
    const std::string id = f.own_ids ? "functions." + c.calls[i].first + ":" + std::to_string(i) : seeded_ids(42)(i);
    EXPECT_EQ(call.id, id) << label;
    const Status valid = validate_tool_call(call, ts);
    EXPECT_TRUE(valid.is_ok()) << label << ": " << valid.to_string();
  }
}

class TemplateRoundTrip : public ::testing::TestWithParam<size_t> {};

TEST_P(TemplateRoundTrip, RenderedCallsParseBackAndStreamTheSame) {
  const Family f = families()[GetParam()];
  for (const Case& c : cases()) {
    const std::string label = f.template_file + " / " + c.label;
    const json messages = {{{"role", "user"}, {"content", "What now?"}}, assistant_message(f, c)};
    const Rendered r = render(f.template_file, messages, tools(), f.kwargs);
    const std::string turn = generated_turn(f, r, c.calls.size());
    ASSERT_FALSE(::testing::Test::HasFailure()) << label;
    const ChatParseOptions o = options_for(f, r);
    auto m = parse_chat_output(turn, o);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    EXPECT_EQ(m->content, f.renders_content ? c.content : "") << label << " turn: " << turn;
    EXPECT_EQ(m->reasoning_content, "") << label;
    EXPECT_TRUE(m->issues.empty()) << label << ": " << (m->issues.empty() ? "" : m->issues[0]);
    expect_calls(f, c, *m, o.tools, label);
    expect_all_chunkings_match(o, turn, f.specials, label);
  }
}

std::string family_name(const ::testing::TestParamInfo<size_t>& info) { return families()[info.param].tool_parser; }

// Every truncation of every rendered turn (a generation cut off by max_tokens at any byte, or a
// model that stopped mid-structure) parses without crashing and streams to the same result.
TEST_P(TemplateRoundTrip, EveryTruncationStreamsLikeItParses) {
  const Family f = families()[GetParam()];
  const Case c = cases()[1];
  const json messages = {{{"role", "user"}, {"content", "What now?"}}, assistant_message(f, c)};
  const Rendered r = render(f.template_file, messages, tools(), f.kwargs);
  const std::string turn = generated_turn(f, r, c.calls.size());
  ASSERT_FALSE(::testing::Test::HasFailure());
  const ChatParseOptions o = options_for(f, r);
  for (size_t len = 0; len <= turn.size(); ++len) {
    const std::string text = turn.substr(0, len);
    auto whole = parse_chat_output(text, o);
    ASSERT_TRUE(whole.is_ok());
    std::vector<std::string> bytes;
    for (char ch : text) bytes.emplace_back(1, ch);
    testing::expect_stream_matches(o, bytes, *whole, false, f.tool_parser + " truncated to " + std::to_string(len));
    testing::expect_stream_matches(o, testing::token_like_chunks(text, f.specials), *whole, true,
                                   f.tool_parser + " truncated to " + std::to_string(len) + ", token-like");
    for (const ToolCall& call : whole->tool_calls) {  // a call cut short says so
      if (call.error.empty()) {
        EXPECT_TRUE(json::parse(call.arguments, nullptr, false).is_object()) << text;
      }
    }
    ASSERT_FALSE(::testing::Test::HasFailure()) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TemplateRoundTrip, ::testing::Range<size_t>(0, 7), family_name);

// Templates that keep reasoning in the rendered turn (Qwen3, GLM): it comes back as
// reasoning_content, the rest as before.
TEST(TemplateReasoning, ReasoningRendersAndParsesBack) {
  for (size_t fi : {1u, 4u}) {
    const Family f = families()[fi];
    const Case c = cases()[0];
    const std::string reasoning = "The user wants weather.\nI will call get_weather for Zürich.";
    const json messages = {{{"role", "user"}, {"content", "What now?"}}, assistant_message(f, c, reasoning)};
    const Rendered r = render(f.template_file, messages, tools(), f.kwargs);
    const std::string turn = generated_turn(f, r, c.calls.size());
    ASSERT_FALSE(::testing::Test::HasFailure());
    const ChatParseOptions o = options_for(f, r);
    EXPECT_FALSE(o.reasoning_open_in_prompt) << f.template_file;
    auto m = parse_chat_output(turn, o);
    ASSERT_TRUE(m.is_ok());
    EXPECT_EQ(m->reasoning_content, reasoning) << turn;
    EXPECT_EQ(m->content, c.content) << turn;
    expect_calls(f, c, *m, o.tools, f.template_file);
    expect_all_chunkings_match(o, turn, f.specials, f.template_file + " reasoning");
  }
}

// Thinking switched off in the template: the prompt closes the block (Qwen3 "<think>\n\n</think>",
// GLM "<think></think>"), the model writes only the answer.
TEST(TemplateReasoning, ThinkingOffTurnsAreAllContent) {
  for (size_t fi : {1u, 4u}) {
    const Family f = families()[fi];
    const Case c = cases()[0];
    json kwargs = f.kwargs;
    kwargs["enable_thinking"] = false;
    const json messages = {{{"role", "user"}, {"content", "What now?"}}, assistant_message(f, c)};
    const Rendered r = render(f.template_file, messages, tools(), kwargs);
    const std::string turn = generated_turn(f, r, c.calls.size());
    ASSERT_FALSE(::testing::Test::HasFailure());
    EXPECT_EQ(turn.find("<think>"), std::string::npos) << turn;
    const ChatParseOptions o = options_for(f, r);
    EXPECT_FALSE(o.reasoning_open_in_prompt);
    auto m = parse_chat_output(turn, o);
    ASSERT_TRUE(m.is_ok());
    EXPECT_EQ(m->reasoning_content, "");
    EXPECT_EQ(m->content, c.content) << turn;
    EXPECT_TRUE(m->issues.empty());
    expect_calls(f, c, *m, o.tools, f.template_file + " thinking off");
    expect_all_chunkings_match(o, turn, f.specials, f.template_file + " thinking off");
  }
}

// DeepSeek V3.1 with thinking on: the prompt opens <think>, the model closes it before the
// answer; the rendered tool-call turn (thinking off) stands for the answer.
TEST(TemplateReasoning, DeepSeekV31ThinkingPromptOpensReasoning) {
  const Family f = families()[2];
  const Case c = cases()[1];
  const json messages = {{{"role", "user"}, {"content", "What now?"}}, assistant_message(f, c)};
  json thinking = f.kwargs;
  thinking["thinking"] = true;
  const Rendered on = render(f.template_file, messages, tools(), thinking);
  EXPECT_TRUE(prompt_opens_reasoning(on.prompt)) << on.prompt;
  const Rendered off = render(f.template_file, messages, tools(), f.kwargs);
  EXPECT_FALSE(prompt_opens_reasoning(off.prompt)) << off.prompt;
  const std::string turn = "Two cities.\nCall both.</think>" + generated_turn(f, off, c.calls.size());
  ChatParseOptions o = options_for(f, on);
  auto m = parse_chat_output(turn, o);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->reasoning_content, "Two cities.\nCall both.");
  EXPECT_EQ(m->content, "");
  expect_calls(f, c, *m, o.tools, "v3.1 thinking");
  expect_all_chunkings_match(o, turn, f.specials, "v3.1 thinking");
}

// Kimi K2-Thinking ends reasoning with </think> or goes straight to its tool-call section.
TEST(TemplateReasoning, KimiThinkingEndsWithMarkerOrToolSection) {
  const Family f = families()[0];
  const Case c = cases()[1];
  const json messages = {{{"role", "user"}, {"content", "What now?"}}, assistant_message(f, c)};
  const Rendered r = render(f.template_file, messages, tools(), f.kwargs);
  const std::string calls = generated_turn(f, r, c.calls.size());
  ChatParseOptions o = options_for(f, r);
  o.reasoning_parser = "kimi_k2";
  for (const std::string& turn : {"<think>Both cities, in parallel.</think>" + calls,
                                  "<think>Both cities, in parallel." + calls}) {
    auto m = parse_chat_output(turn, o);
    ASSERT_TRUE(m.is_ok());
    EXPECT_EQ(m->reasoning_content, "Both cities, in parallel.") << turn;
    EXPECT_EQ(m->content, "");
    EXPECT_TRUE(m->issues.empty());
    expect_calls(f, c, *m, o.tools, "kimi thinking");
    auto specials = f.specials;
    specials.push_back("<think>");
    specials.push_back("</think>");
    expect_all_chunkings_match(o, turn, specials, "kimi thinking");
  }
}

TEST(GuessParser, FromEachTemplate) {
  const std::vector<std::tuple<std::string, std::string, std::string>> expected = {
      {"moonshotai-Kimi-K2.jinja", "kimi_k2", ""},
      {"GLM-4.6.jinja", "glm45", "glm45"},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek_v31", "deepseek_v31"},
      {"deepseek-ai-DeepSeek-V3.jinja", "deepseek_v3", ""},
      {"Qwen-Qwen3-0.6B.jinja", "qwen3", "qwen3"},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes", ""},
      {"Qwen3-Coder.jinja", "qwen3_coder", ""},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "", ""},
      {"google-gemma-2-2b-it.jinja", "", ""},
  };
  for (const auto& [file, tool, reasoning] : expected) {
    const std::string text = densa::testing::read_text(templates_dir() / file);
    ASSERT_FALSE(text.empty()) << file;
    EXPECT_EQ(guess_tool_parser(text), tool) << file;
    EXPECT_EQ(guess_reasoning_parser(text), reasoning) << file;
  }
}

}  // namespace
}  // namespace densa::toolparse
