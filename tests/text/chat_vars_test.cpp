// The OpenAI-request-to-template-variables mapping (vLLM's): expected variables written from
// vLLM's rules, refusals by name, and a converted request rendered through a real template
// byte-equal to Jinja2 on the same variables.
#include "text/chat_vars.h"

#include <gtest/gtest.h>

#include "jinja_test_util.h"
#include "test_util.h"

namespace densa {
namespace {

using Json = nlohmann::ordered_json;

const Json kRequest = Json::parse(R"({
  "model": "m", "temperature": 0.2,
  "messages": [
    {"role": "system", "content": [{"type": "text", "text": "Be terse."}, {"type": "text", "text": "Use tools."}]},
    {"role": "user", "content": "Weather in Oslo?", "name": "alice"},
    {"role": "assistant", "content": null, "refusal": null,
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "cold"},
    {"role": "assistant", "content": "It is cold.", "reasoning_content": "The tool said cold."}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
  "add_generation_prompt": false,
  "chat_template_kwargs": {"enable_thinking": false, "add_generation_prompt": true}
})");

TEST(ChatVars, MapsARequestAsVllmDoes) {
  Result<Json> vars = chat_template_vars(kRequest, {"<s>", "</s>"});
  ASSERT_TRUE(vars.is_ok()) << vars.status().message();
  const Json want = Json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be terse.\nUse tools."},
      {"role": "user", "content": "Weather in Oslo?", "name": "alice"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}}]},
      {"role": "tool", "content": "cold", "tool_call_id": "call_1"},
      {"role": "assistant", "content": "It is cold.", "reasoning_content": "The tool said cold."}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": null,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "documents": null,
    "add_generation_prompt": true,
    "bos_token": "<s>", "eos_token": "</s>",
    "enable_thinking": false
  })");
  EXPECT_EQ(vars->dump(), want.dump());
}

TEST(ChatVars, DefaultsWithoutToolsOrKwargs) {
  Result<Json> vars = chat_template_vars(Json::parse(R"({"messages": [{"role": "user", "content": "hi"}]})"), {"", ""});
  ASSERT_TRUE(vars.is_ok());
  EXPECT_TRUE((*vars)["tools"].is_null());
  EXPECT_TRUE((*vars)["documents"].is_null());
  EXPECT_EQ((*vars)["add_generation_prompt"], true);
  EXPECT_EQ((*vars)["messages"].dump(), R"([{"role":"user","content":"hi"}])");
}

void expect_refused(const std::string& request, const std::string& fragment) {
  Result<Json> vars = chat_template_vars(Json::parse(request), {"", ""});
  ASSERT_FALSE(vars.is_ok()) << request;
  EXPECT_EQ(vars.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(vars.status().message().find(fragment), std::string::npos) << vars.status().message();
}

TEST(ChatVars, RefusesWhatItCannotMapByName) {
  expect_refused(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
                 "content part type 'image_url' is not supported");
  expect_refused(R"({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]})",
                 "'input_audio'");
  expect_refused(R"({"messages": [{"role": "user", "content": "x", "weird": 1}]})", "field 'weird' is not supported");
  expect_refused(R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{bad"}}]}]})",
                 "arguments is not valid JSON");
  expect_refused(R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}]})",
                 "arguments must be a JSON string");
  expect_refused(R"({"messages": [{"content": "no role"}]})", "messages[0].role");
  expect_refused(R"({"messages": "nope"})", "\"messages\" array");
  expect_refused(R"({"messages": [], "chat_template_kwargs": [1]})", "chat_template_kwargs must be an object");
  expect_refused(R"({"messages": [], "continue_final_message": true})", "continue_final_message");
  expect_refused(R"({"messages": [], "tools": [{"type": "function"}]})", "tools[0]");
}

TEST(ChatVars, ConvertedRequestRendersLikeJinja2) {
  Result<Json> vars = chat_template_vars(kRequest, {"<s>", "</s>"});
  ASSERT_TRUE(vars.is_ok());
  const std::filesystem::path dir = testing::models_dir().parent_path() / "templates";
  Json cases = Json::array();
  for (const char* name : {"Qwen-Qwen3-0.6B.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja", "moonshotai-Kimi-K2.jinja"})
    cases.push_back({{"template", testing::read_text(dir / name)}, {"vars", *vars}, {"now", 1764676800}});
  const std::vector<testing::RenderOutcome> want = testing::reference_render(cases);
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(want[i].ok) << want[i].text;
    const testing::RenderOutcome got = testing::densa_render(cases[i]);
    EXPECT_TRUE(got.ok) << got.text;
    EXPECT_EQ(got.text, want[i].text);
  }
  // The parsed arguments reach the template as an object: Qwen3 prints them with tojson.
  EXPECT_NE(want[0].text.find(R"("arguments": {"city": "Oslo", "days": 2})"), std::string::npos) << want[0].text;
}

}  // namespace
}  // namespace densa
