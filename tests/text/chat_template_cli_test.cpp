// `densa chat-template` through the binary: a template file, an HF directory (tokenizer_config
// string and list forms, chat_template.jinja preferred over it) and a GGUF file's
// tokenizer.chat_template; the prompt printed exactly (byte-equal to Jinja2, no newline added);
// failures exit non-zero with the error on stderr.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <unistd.h>

#include "io/gguf_writer.h"
#include "jinja_test_util.h"
#include "test_util.h"
#include "text/chat_template_source.h"

namespace densa {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct CliRun {
  int rc = -1;
  std::string out;
};

CliRun run_cli(const std::string& args) {
  const std::string cmd = std::string(DENSA_BINARY) + " chat-template " + args + " 2>/dev/null";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  r.rc = pclose(p);
  return r;
}

class ChatTemplateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("densa_chat_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    vars_ = Json::parse(testing::read_text(fs::path(DENSA_SOURCE_DIR) / "tests/text/data/chat_conversations.json"))[4]["vars"];
    std::ofstream(dir_ / "vars.json") << vars_.dump();
    source_ = testing::read_text(testing::models_dir().parent_path() / "templates/Qwen-Qwen3-0.6B.jinja");
    const auto ref = testing::reference_render(Json::array({{{"template", source_}, {"vars", vars_}}}));
    ASSERT_EQ(ref.size(), 1u);
    ASSERT_TRUE(ref[0].ok) << ref[0].text;
    expected_ = ref[0].text;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  Json vars_;
  std::string source_, expected_;
};

TEST_F(ChatTemplateCli, RendersATemplateFileExactly) {
  std::ofstream(dir_ / "t.jinja", std::ios::binary) << source_;
  const CliRun r = run_cli("--template " + (dir_ / "t.jinja").string() + " --vars " + (dir_ / "vars.json").string());
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, expected_);
}

TEST_F(ChatTemplateCli, ReadsTheTemplateFromAHfDirectory) {
  const fs::path hf = dir_ / "hf";
  fs::create_directories(hf);
  // The list form: "default" is taken.
  Json cfg = {{"chat_template", Json::array({{{"name", "tool_use"}, {"template", "WRONG"}}, {{"name", "default"}, {"template", source_}}})}};
  std::ofstream(hf / "tokenizer_config.json") << cfg.dump();
  CliRun r = run_cli("--model " + hf.string() + " --vars " + (dir_ / "vars.json").string());
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, expected_);
  // chat_template.jinja wins over tokenizer_config.json, as in transformers.
  std::ofstream(hf / "chat_template.jinja", std::ios::binary) << "jinja file {{ messages | length }}";
  r = run_cli("--model " + hf.string() + " --vars " + (dir_ / "vars.json").string());
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "jinja file 5");
  // The string form.
  fs::remove(hf / "chat_template.jinja");
  std::ofstream(hf / "tokenizer_config.json") << Json{{"chat_template", "{{ bos_token }}!"}}.dump();
  r = run_cli("--model " + hf.string() + " --vars " + (dir_ / "vars.json").string());
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "<s>!");
  // A list without "default" is refused by name.
  std::ofstream(hf / "tokenizer_config.json") << Json{{"chat_template", Json::array({{{"name", "rag"}, {"template", "x"}}})}}.dump();
  Result<std::string> t = load_chat_template(hf);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("no \"default\" entry (has: rag)"), std::string::npos) << t.status().message();
}

TEST_F(ChatTemplateCli, ReadsTheTemplateFromGgufMetadata) {
  GgufValue v;
  v.type = GgufType::kString;
  v.str = source_;
  const fs::path gguf = dir_ / "m.gguf";
  ASSERT_TRUE(write_gguf(gguf, {{"tokenizer.chat_template", v}}, {}).is_ok());
  const CliRun r = run_cli("--model " + gguf.string() + " --vars " + (dir_ / "vars.json").string());
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, expected_);
  // The fixture GGUF has no template: a clear failure.
  Result<std::string> none = load_chat_template(testing::models_dir() / "tinystories-llama-1m/gguf/tinystories-llama-1m-f32.gguf");
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

TEST_F(ChatTemplateCli, FailsWithNonZeroExit) {
  std::ofstream(dir_ / "bad.jinja") << "{% if %}";
  EXPECT_NE(run_cli("--template " + (dir_ / "bad.jinja").string() + " --vars " + (dir_ / "vars.json").string()).rc, 0);
  std::ofstream(dir_ / "raise.jinja") << "{{ raise_exception('no') }}";
  const CliRun r = run_cli("--template " + (dir_ / "raise.jinja").string() + " --vars " + (dir_ / "vars.json").string());
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(run_cli("--vars " + (dir_ / "vars.json").string()).rc, 0);  // neither --model nor --template
}

}  // namespace
}  // namespace densa
