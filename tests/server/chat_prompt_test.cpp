// ChatFormat / render_chat: the model's Jinja template or --chat-template, the plain
// fallback for models that ship none, the template variables (vLLM's mapping), and errors as
// errors (a template's raise_exception, a template that does not parse), never a different
// prompt.
#include "server/chat_prompt.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "model/model_loader.h"
#include "test_util.h"

namespace densa::server {
namespace {

using ojson = nlohmann::ordered_json;

const ModelWeights& weights() {
  static const ModelWeights* w = [] {
    auto loaded = load_model(densa::testing::model_dir("tinystories-llama-1m") / "gguf" / "tinystories-llama-1m-f16.gguf");
    CHECK(loaded.is_ok()) << loaded.status().to_string();
    return new ModelWeights(std::move(loaded).value());
  }();
  return *w;
}

api::OpenAiRequest chat(const std::string& body) {
  api::RequestError error;
  std::optional<api::OpenAiRequest> r = api::parse_openai_request(api::ApiKind::kChat, body, error);
  CHECK(r.has_value()) << error.status.to_string();
  return *r;
}

std::string write_template(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / ("densa_chat_prompt_" + name + "_" + std::to_string(::getpid()) + ".jinja")).string();
  std::ofstream(path) << text;
  return path;
}

TEST(ChatPrompt, ModelWithoutTemplateGetsThePlainFallback) {
  auto f = make_chat_format(weights(), {});
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_FALSE(f->jinja.has_value());
  EXPECT_NE(f->origin.find("plain fallback"), std::string::npos);
  EXPECT_EQ(f->tool_parser, "");
  auto r = render_chat(*f, chat(R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"}]})"));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->text, "System: S\nUser: Hi\nAssistant:");
  EXPECT_TRUE(r->add_special_tokens);
  // What the fallback cannot express is refused, not dropped.
  auto tools = render_chat(*f, chat(R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function",
                                       "function":{"name":"f"}}]})"));
  ASSERT_FALSE(tools.is_ok());
  EXPECT_NE(tools.status().message().find("need a chat template"), std::string::npos);
  auto kwargs = render_chat(*f, chat(R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"x":1}})"));
  EXPECT_FALSE(kwargs.is_ok());
}

TEST(ChatPrompt, TemplateFileVariablesAndErrors) {
  const std::string path = write_template("vars", R"({{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% if m.tool_calls %}{% for c in m.tool_calls %}<{{ c.function.name }} {{ c.function.arguments | tojson }} {{ c.function.arguments.city }}>{% endfor %}{% endif %}{% endfor %}{% if tools %}T={{ tools | length }}{% endif %}{% if flag %}F{% endif %}{% if add_generation_prompt %}[assistant]{% endif %}{% if messages[0].content == 'boom' %}{{ raise_exception('no booms here') }}{% endif %})");
  auto f = make_chat_format(weights(), {path, "", ""});
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_TRUE(f->jinja.has_value());
  EXPECT_EQ(f->origin, "--chat-template " + path);
  EXPECT_EQ(f->bos_token, "<s>");
  auto r = render_chat(*f, chat(R"({"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":"",
      "tool_calls":[{"id":"1","type":"function","function":{"name":"get","arguments":"{\"zeta\": 1, \"city\": \"Oslo\"}"}}]}],
      "tools":[{"type":"function","function":{"name":"get"}}],"chat_template_kwargs":{"flag":true}})"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  // Arguments reach the template as an object, in the order sent.
  EXPECT_EQ(r->text, R"(<s>[user]w?[assistant]<get {"zeta": 1, "city": "Oslo"} Oslo>T=1F[assistant])");
  EXPECT_FALSE(r->add_special_tokens);
  auto no_gen = render_chat(*f, chat(R"({"messages":[{"role":"user","content":"w?"}],"add_generation_prompt":false})"));
  ASSERT_TRUE(no_gen.is_ok());
  EXPECT_EQ(no_gen->text, "<s>[user]w?");
  auto boom = render_chat(*f, chat(R"({"messages":[{"role":"user","content":"boom"}]})"));
  ASSERT_FALSE(boom.is_ok());
  EXPECT_EQ(boom.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(boom.status().message().find("no booms here"), std::string::npos) << boom.status().to_string();
  auto bad_args = render_chat(*f, chat(R"({"messages":[{"role":"assistant","content":"",
      "tool_calls":[{"id":"1","type":"function","function":{"name":"get","arguments":"{oops"}}]}]})"));
  ASSERT_FALSE(bad_args.is_ok());
  EXPECT_NE(bad_args.status().message().find("arguments"), std::string::npos) << bad_args.status().to_string();
}

TEST(ChatPrompt, BadTemplatesAndParserNamesFailAtStartUp) {
  const std::string broken = write_template("broken", "{% for m in messages %}{{ m.content }}");
  auto f = make_chat_format(weights(), {broken, "", ""});
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("chat template (--chat-template"), std::string::npos) << f.status().to_string();
  auto missing = make_chat_format(weights(), {"/nonexistent/t.jinja", "", ""});
  EXPECT_FALSE(missing.is_ok());
  const std::string ok = write_template("ok", "{{ messages[0].content }}");
  auto parser = make_chat_format(weights(), {ok, "no_such_parser", ""});
  ASSERT_FALSE(parser.is_ok());
  EXPECT_NE(parser.status().message().find("unknown tool parser 'no_such_parser'"), std::string::npos);
  auto chosen = make_chat_format(weights(), {ok, "kimi_k2", "none"});
  ASSERT_TRUE(chosen.is_ok()) << chosen.status().to_string();
  EXPECT_EQ(chosen->tool_parser, "kimi_k2");
  EXPECT_EQ(chosen->reasoning_parser, "");
}

}  // namespace
}  // namespace densa::server
