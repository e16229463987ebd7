// Every real chat template in /work/shared/templates, rendered by densa and by Python Jinja2 in
// HF's apply_chat_template environment, across the conversations in
// tests/text/data/chat_conversations.json: outputs byte-equal, and where Jinja2 fails densa
// fails too (with the same message for the template's own raise_exception).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "jinja_test_util.h"
#include "test_util.h"

namespace densa {
namespace {

using testing::RenderOutcome;

const std::filesystem::path kTemplatesDir = testing::models_dir().parent_path() / "templates";
constexpr int64_t kFixedNow = 1764676800;  // strftime_now's clock in both engines

struct Corpus {
  std::vector<std::string> template_names;
  std::vector<std::string> conversation_names;
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  std::vector<RenderOutcome> reference;
};

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus c;
    const nlohmann::ordered_json convs = nlohmann::ordered_json::parse(
        testing::read_text(std::filesystem::path(DENSA_SOURCE_DIR) / "tests/text/data/chat_conversations.json"));
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(kTemplatesDir))
      if (e.path().extension() == ".jinja") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string source = testing::read_text(f);
      for (const auto& conv : convs) {
        c.template_names.push_back(f.filename().string());
        c.conversation_names.push_back(conv["name"].get<std::string>());
        c.cases.push_back({{"template", source}, {"vars", conv["vars"]}, {"now", kFixedNow}});
      }
    }
    c.reference = testing::reference_render(c.cases);
    return c;
  }();
  return c;
}

TEST(JinjaTemplates, FindsAllFourteenTemplatesAndTenConversationsEach) {
  const Corpus& c = corpus();
  std::map<std::string, int> per_template;
  for (const auto& n : c.template_names) ++per_template[n];
  EXPECT_EQ(per_template.size(), 14u) << "templates in " << kTemplatesDir;
  for (const auto& [name, count] : per_template) EXPECT_GE(count, 10) << name;
}

TEST(JinjaTemplates, ByteEqualToJinja2OrFailingLikeIt) {
  const Corpus& c = corpus();
  ASSERT_EQ(c.reference.size(), c.cases.size());
  std::map<std::string, int> rendered;  // per template: conversations Jinja2 rendered
  for (size_t i = 0; i < c.cases.size(); ++i) {
    const RenderOutcome& want = c.reference[i];
    const RenderOutcome got = testing::densa_render(c.cases[i]);
    SCOPED_TRACE(c.template_names[i] + " / " + c.conversation_names[i]);
    if (want.ok) {
      ++rendered[c.template_names[i]];
      EXPECT_TRUE(got.ok) << got.text;
      EXPECT_EQ(got.text, want.text);
      continue;
    }
    EXPECT_FALSE(got.ok) << "Jinja2 failed with: " << want.text << "\ndensa rendered: " << got.text;
    const std::string raised = testing::raised_message(want.text);
    if (!raised.empty()) {
      EXPECT_NE(got.text.find(raised), std::string::npos) << got.text << " vs " << want.text;
    }
  }
  // Each template must mostly render (so agreement is not just both failing).
  for (const auto& name : std::set<std::string>(c.template_names.begin(), c.template_names.end()))
    EXPECT_GE(rendered[name], 5) << name;
}

// The templates' raise_exception calls on bad conversations: densa's error carries the
// template's message.
TEST(JinjaTemplates, RaiseExceptionForBadRoleOrder) {
  const std::string gemma = testing::read_text(kTemplatesDir / "google-gemma-2-2b-it.jinja");
  Result<jinja::Template> t = jinja::Template::parse(gemma);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  nlohmann::ordered_json vars = {{"bos_token", "<bos>"},
                                 {"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}}}};
  Result<std::string> r = t->render(vars);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("Conversation roles must alternate user/assistant/user/assistant/..."),
            std::string::npos)
      << r.status().message();
  vars["messages"] = {{{"role", "system"}, {"content", "s"}}};
  r = t->render(vars);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("System role not supported"), std::string::npos);
}

}  // namespace
}  // namespace densa
