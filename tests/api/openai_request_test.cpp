#include "api/openai_request.h"

#include <gtest/gtest.h>

namespace densa::server {
namespace {

std::optional<api::OpenAiRequest> parse(api::ApiKind kind, const std::string& body, api::RequestError* error_out = nullptr) {
  api::RequestError error;
  auto r = api::parse_openai_request(kind, body, error);
  if (error_out) *error_out = error;
  return r;
}

std::string error_param(api::ApiKind kind, const std::string& body) {
  api::RequestError error;
  EXPECT_FALSE(parse(kind, body, &error).has_value()) << body;
  EXPECT_EQ(error.status.code(), StatusCode::kInvalidArgument) << body;
  return error.param;
}

TEST(OpenAiRequest, CompletionFields) {
  auto r = parse(api::ApiKind::kCompletion,
                 R"({"model":"m","prompt":"Hi","max_tokens":5,"temperature":0,"top_p":0.9,"top_k":40,"min_p":0.1,
                     "seed":7,"stop":["a","b"],"n":2,"logprobs":3,"echo":true,"stream":true,
                     "stream_options":{"include_usage":true},"user":"u-1","presence_penalty":0,"best_of":1})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->model, "m");
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_EQ(r->prompts[0].text, "Hi");
  EXPECT_EQ(r->max_tokens, 5);
  EXPECT_EQ(r->sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r->sampling.top_p, 0.9f);
  EXPECT_EQ(r->sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r->sampling.min_p, 0.1f);
  EXPECT_EQ(r->seed, 7u);
  EXPECT_EQ(r->stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->n, 2);
  EXPECT_EQ(r->num_top_logprobs, 3);
  EXPECT_TRUE(r->echo);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

TEST(OpenAiRequest, PromptShapes) {
  auto ids = parse(api::ApiKind::kCompletion, R"({"prompt":[1,2,3]})");
  ASSERT_TRUE(ids);
  ASSERT_EQ(ids->prompts.size(), 1u);
  EXPECT_TRUE(ids->prompts[0].is_ids);
  EXPECT_EQ(ids->prompts[0].ids, (std::vector<TokenId>{1, 2, 3}));
  auto list = parse(api::ApiKind::kCompletion, R"({"prompt":["a",[4,5],"c"]})");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->prompts.size(), 3u);
  EXPECT_EQ(list->prompts[2].text, "c");
  EXPECT_TRUE(list->prompts[1].is_ids);
  auto stop = parse(api::ApiKind::kCompletion, R"({"prompt":"x","stop":"\n","max_completion_tokens":9})");
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(stop->max_tokens, 9);
  EXPECT_EQ(stop->num_top_logprobs, -1);
  EXPECT_FLOAT_EQ(stop->sampling.temperature, 1.0f);
}

TEST(OpenAiRequest, ChatFields) {
  auto r = parse(api::ApiKind::kChat, R"({"messages":[{"role":"system","content":"S"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null}],"logprobs":true,"top_logprobs":2})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[1].content, "ab");
  EXPECT_EQ(r->num_top_logprobs, 2);
  auto plain = parse(api::ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->num_top_logprobs, 0);
}

TEST(OpenAiRequest, ErrorsNameTheField) {
  const api::ApiKind c = api::ApiKind::kCompletion, chat = api::ApiKind::kChat;
  EXPECT_EQ(error_param(c, "{not json"), "");
  EXPECT_EQ(error_param(c, "[1,2]"), "");
  EXPECT_EQ(error_param(c, R"({})"), "prompt");
  EXPECT_EQ(error_param(c, R"({"prompt":5})"), "prompt");
  EXPECT_EQ(error_param(c, R"({"prompt":[]})"), "prompt");
  EXPECT_EQ(error_param(c, R"({"prompt":[1,-2]})"), "prompt");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","model":3})"), "model");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","max_tokens":"5"})"), "max_tokens");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","max_tokens":0})"), "max_tokens");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","max_tokens":-3})"), "max_tokens");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","max_tokens":1.5})"), "max_tokens");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","temperature":"hot"})"), "temperature");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","temperature":3})"), "temperature");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","top_p":0})"), "top_p");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","n":0})"), "n");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","n":100})"), "n");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","stop":5})"), "stop");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","logprobs":true})"), "logprobs");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","logprobs":21})"), "logprobs");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","stream":"yes"})"), "stream");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","stream_options":{"include_usage":1}})"), "stream_options");
  EXPECT_EQ(error_param(chat, R"({"messages":"hi"})"), "messages");
  EXPECT_EQ(error_param(chat, R"({"messages":[]})"), "messages");
  EXPECT_EQ(error_param(chat, R"({"messages":[{"role":"wizard","content":"x"}]})"), "messages");
  EXPECT_EQ(error_param(chat, R"({"messages":[{"role":"user"}]})"), "messages");
  EXPECT_EQ(error_param(chat, R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})"), "top_logprobs");
}

TEST(OpenAiRequest, NoFieldIsSilentlyIgnored) {
  const api::ApiKind c = api::ApiKind::kCompletion, chat = api::ApiKind::kChat;
  api::RequestError error;
  // An unknown field is refused by name, with the endpoint.
  EXPECT_FALSE(parse(c, R"({"prompt":"x","unknown_field":{"x":1}})", &error));
  EXPECT_EQ(error.param, "unknown_field");
  EXPECT_NE(error.status.message().find("'unknown_field' is not supported"), std::string::npos) << error.status.message();
  // A field of the other endpoint is unknown here.
  EXPECT_EQ(error_param(c, R"({"prompt":"x","tools":[]})"), "tools");
  EXPECT_EQ(error_param(chat, R"({"messages":[{"role":"user","content":"x"}],"echo":true})"), "echo");
  // Accepted only at the value that changes nothing.
  EXPECT_EQ(error_param(c, R"({"prompt":"x","presence_penalty":0.5})"), "presence_penalty");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","frequency_penalty":-1})"), "frequency_penalty");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","best_of":2})"), "best_of");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","logit_bias":{"5":100}})"), "logit_bias");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","suffix":"tail"})"), "suffix");
  EXPECT_TRUE(parse(c, R"({"prompt":"x","logit_bias":{},"suffix":"","frequency_penalty":0.0})"));
  // Ignored by name (they change nothing about the output).
  EXPECT_TRUE(parse(chat, R"({"messages":[{"role":"user","content":"x"}],"user":"u","metadata":{"k":"v"},
                             "service_tier":"auto","store":false})"));
  // cache_salt: a non-empty string of bounded size.
  auto salted = parse(c, R"({"prompt":"x","cache_salt":"tenant-7"})");
  ASSERT_TRUE(salted);
  EXPECT_EQ(salted->cache_salt, "tenant-7");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","cache_salt":""})"), "cache_salt");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","cache_salt":5})"), "cache_salt");
  EXPECT_EQ(error_param(c, R"({"prompt":"x","cache_salt":")" + std::string(300, 's') + R"("})"), "cache_salt");
  // densa_inject_fault: the name of a KV fault kind (served only by a server that allows it).
  auto faulty = parse(c, R"({"prompt":"x","densa_inject_fault":"page-reuse"})");
  ASSERT_TRUE(faulty);
  ASSERT_TRUE(faulty->inject_fault.has_value());
  EXPECT_EQ(*faulty->inject_fault, KvFault::kPageReuse);
  EXPECT_FALSE(parse(c, R"({"prompt":"x"})")->inject_fault.has_value());
  EXPECT_EQ(error_param(c, R"({"prompt":"x","densa_inject_fault":"gremlins"})"), "densa_inject_fault");
  EXPECT_EQ(error_param(chat, R"({"messages":[{"role":"user","content":"x"}],"densa_inject_fault":true})"),
            "densa_inject_fault");
  // Unknown message fields too.
  EXPECT_EQ(error_param(chat, R"({"messages":[{"role":"user","content":"x","audio":{}}]})"), "messages");
  EXPECT_EQ(error_param(chat, R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})"),
            "messages");
}

TEST(OpenAiRequest, ToolsToolChoiceAndResponseFormat) {
  const api::ApiKind chat = api::ApiKind::kChat;
  const std::string msgs = R"("messages":[{"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"sunny"}])";
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])";
  auto r = parse(chat, "{" + msgs + "," + tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}},
      "parallel_tool_calls":false,"chat_template_kwargs":{"enable_thinking":false}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->tool_choice, api::ToolChoiceKind::kNamed);
  EXPECT_EQ(r->tool_choice_name, "get_weather");
  EXPECT_FALSE(r->parallel_tool_calls);
  EXPECT_EQ(r->chat_template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r->messages[1].raw["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_TRUE(r->messages[1].raw["content"].is_null());
  EXPECT_EQ(r->messages[2].raw["tool_call_id"], "c1");
  for (const char* choice : {R"("none")", R"("auto")", R"("required")"}) {
    auto q = parse(chat, "{" + msgs + "," + tools + R"(,"tool_choice":)" + choice + "}");
    ASSERT_TRUE(q) << choice;
  }
  EXPECT_EQ(error_param(chat, "{" + msgs + "," + tools + R"(,"tool_choice":"sometimes"})"), "tool_choice");
  EXPECT_EQ(error_param(chat, "{" + msgs + "," + tools + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}}})"),
            "tool_choice");
  EXPECT_EQ(error_param(chat, "{" + msgs + R"(,"tool_choice":"required"})"), "tool_choice");
  EXPECT_EQ(error_param(chat, "{" + msgs + R"(,"tools":[{"type":"retrieval"}]})"), "tools");
  EXPECT_EQ(error_param(chat, R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})"), "messages");

  auto js = parse(chat, "{" + msgs + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"w",
      "strict":true,"schema":{"type":"object"}}}})");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->response_format.kind, api::ResponseFormatKind::kJsonSchema);
  EXPECT_TRUE(js->response_format.strict);
  EXPECT_EQ(js->response_format.schema["type"], "object");
  auto re = parse(chat, "{" + msgs + R"(,"response_format":{"type":"regex","regex":"[0-9]+"}})");
  ASSERT_TRUE(re);
  EXPECT_EQ(re->response_format.kind, api::ResponseFormatKind::kRegex);
  EXPECT_EQ(re->response_format.grammar, "[0-9]+");
  EXPECT_EQ(error_param(chat, "{" + msgs + R"(,"response_format":{"type":"xml"}})"), "response_format");
  EXPECT_EQ(error_param(chat, "{" + msgs + R"(,"response_format":{"type":"json_schema"}})"), "response_format");
  EXPECT_EQ(error_param(chat, "{" + msgs + R"(,"response_format":{"type":"json_object","schema":{}}})"),
            "response_format");
}

}  // namespace
}  // namespace densa::server

namespace densa::server {
namespace {

// Integers written as floats are range-checked before conversion: 9223372036854775807.0 is
// the double 2^63, one past int64's range (converting it was undefined behaviour).
TEST(OpenAiRequest, FloatIntegersBeyondInt64AreOutOfRange) {
  api::RequestError error;
  EXPECT_FALSE(parse(api::ApiKind::kCompletion, R"({"prompt":"x","seed":9223372036854775807.0})", &error));
  EXPECT_EQ(error.param, "seed");
  EXPECT_NE(error.status.message().find("must be between"), std::string::npos) << error.status.message();
  EXPECT_EQ(error_param(api::ApiKind::kCompletion, R"({"prompt":"x","max_tokens":1e300})"), "max_tokens");
  EXPECT_EQ(error_param(api::ApiKind::kCompletion, R"({"prompt":"x","seed":18446744073709551615})"), "seed");
  auto big = parse(api::ApiKind::kCompletion, R"({"prompt":"x","seed":9223372036854775807,"n":2.0})");
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->seed, uint64_t{9223372036854775807});
  EXPECT_EQ(big->n, 2);
}

TEST(OpenAiRequest, DeeplyNestedBodiesAreRefusedBeforeParsing) {
  EXPECT_EQ(api::json_nesting_depth(R"({"a":[{"b":"[[[{{{"}],"c":"\"]"}")", 100), 3);  // brackets in strings do not count
  EXPECT_EQ(api::json_nesting_depth(std::string(1000, '['), 40), 41);                 // stops once past the limit
  api::RequestError error;
  // A megabyte of '[' (a JSON parser spends seconds on it): a clear error, no parse.
  EXPECT_FALSE(parse(api::ApiKind::kCompletion, std::string(1 << 20, '['), &error).has_value());
  EXPECT_EQ(error.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(error.status.message().find("deeper than 32"), std::string::npos) << error.status.message();
  // Just over the limit inside a field is refused the same way; a prompt full of brackets is text.
  std::string deep = R"({"prompt":"x","stop":)" + std::string(33, '[') + std::string(33, ']') + "}";
  EXPECT_FALSE(parse(api::ApiKind::kCompletion, deep, &error).has_value());
  EXPECT_NE(error.status.message().find("deeper than 32"), std::string::npos);
  EXPECT_TRUE(parse(api::ApiKind::kCompletion, R"({"prompt":")" + std::string(5000, '[') + R"("})").has_value());
}

TEST(OpenAiRequest, ChoicesAndStopStringsAreBounded) {
  const api::ApiKind c = api::ApiKind::kCompletion;
  EXPECT_TRUE(parse(c, R"({"prompt":"x","n":16})").has_value());
  EXPECT_EQ(error_param(c, R"({"prompt":"x","n":17})"), "n");
  std::string sixteen = "[", seventeen;
  for (int i = 0; i < 16; ++i) sixteen += std::string(i ? "," : "") + "\"s" + std::to_string(i) + "\"";
  seventeen = sixteen + ",\"s16\"]";
  sixteen += "]";
  EXPECT_TRUE(parse(c, R"({"prompt":"x","stop":)" + sixteen + "}").has_value());
  EXPECT_EQ(error_param(c, R"({"prompt":"x","stop":)" + seventeen + "}"), "stop");
  // One stop string of at most kMaxStopStringBytes, as a string or inside the list.
  const std::string longest(api::kMaxStopStringBytes, 'a'), over(api::kMaxStopStringBytes + 1, 'a');
  EXPECT_TRUE(parse(c, R"({"prompt":"x","stop":")" + longest + R"("})").has_value());
  api::RequestError error;
  EXPECT_FALSE(parse(c, R"({"prompt":"x","stop":")" + over + R"("})", &error).has_value());
  EXPECT_EQ(error.param, "stop");
  EXPECT_NE(error.status.message().find("at most 1024 bytes"), std::string::npos) << error.status.message();
  EXPECT_EQ(error_param(c, R"({"prompt":"x","stop":["a",")" + over + R"("]})"), "stop");
}

}  // namespace
}  // namespace densa::server
