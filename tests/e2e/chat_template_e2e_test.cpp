// End to end on a real vocabulary: a random-weight checkpoint carrying Qwen3's tokenizer and
// chat template (densa gen-model --tokenizer), served by `densa serve`. The prompt ids densa
// builds for a conversation equal Hugging Face's: Python Jinja2 in apply_chat_template's
// environment renders it (tests/text/jinja_reference.py) and the HF tokenizers library
// (tests/text/tokenizer_oracle.cjs) encodes it. /tokenize renders exactly as
// /v1/chat/completions does, whose usage agrees.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "e2e/qwen_checkpoint.h"
#include "e2e/server_process.h"
#include "test_util.h"
#include "text/tokenizer_oracle_util.h"

namespace densa::testing {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

// Jinja2 (HF's environment) renders each case's vars with the template.
std::vector<std::string> reference_render(const std::string& tmpl, const std::vector<ojson>& vars) {
  ojson cases = ojson::array();
  for (const ojson& v : vars) cases.push_back({{"template", tmpl}, {"vars", v}});
  const fs::path in = oracle_tmp("chat-e2e-cases.json");
  std::ofstream(in) << cases.dump();
  int rc = 0;
  const std::string out = run_command("/usr/bin/python3 " + shell_quote(std::string(DENSA_SOURCE_DIR) + "/tests/text/jinja_reference.py") +
                                      " < " + shell_quote(in.string()), &rc);
  EXPECT_EQ(rc, 0) << out;
  std::vector<std::string> texts;
  for (const json& r : json::parse(out)) {
    EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
    texts.push_back(r.value("output", ""));
  }
  return texts;
}

TEST(E2eChatTemplate, PromptIdsEqualHuggingFaceOnQwen3) {
  const fs::path model = qwen_checkpoint();
  ASSERT_TRUE(fs::exists(model / "tokenizer.json"));
  const std::string tmpl = read_json(model / "tokenizer_config.json")["chat_template"];
  ServerProcess server({"--served-model-name", "qwen-random"}, model.string());
  ASSERT_TRUE(server.wait_ready());

  const json models = json::parse(server.get("/v1/models").body)["data"][0];
  EXPECT_EQ(models["densa_chat_template"], "the model's chat template");
  EXPECT_EQ(models["densa_tool_parser"], "qwen3");  // the hermes format, guessed from the template

  const ojson tools = ojson::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Weather in a city",
      "parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1},
      "units":{"enum":["c","f"]}},"required":["city"]}}}])");
  // The conversations as an OpenAI client sends them (arguments as JSON strings) and as HF
  // gets them (arguments as objects, vLLM's mapping).
  struct Case {
    ojson request;
    ojson hf_vars;
  };
  std::vector<Case> cases;
  {
    ojson msgs = ojson::parse(R"([{"role":"system","content":"Be brief. Ünïcødé ✓ {{ not jinja }}"},
                                   {"role":"user","content":"Tell me a story about 猫 and 🐈‍⬛."}])");
    cases.push_back({{{"messages", msgs}}, {{"messages", msgs}, {"add_generation_prompt", true}}});
  }
  {
    ojson msgs = ojson::parse(R"([{"role":"user","content":"hi"},{"role":"assistant","content":"Hello!"},
                                   {"role":"user","content":"again, with   spaces\n\tand tabs"}])");
    ojson req = {{"messages", msgs}, {"chat_template_kwargs", {{"enable_thinking", false}}}};
    cases.push_back({req, {{"messages", msgs}, {"add_generation_prompt", true}, {"enable_thinking", false}}});
  }
  {
    ojson sent = ojson::parse(R"([{"role":"user","content":"Weather in Oslo and Paris?"},
        {"role":"assistant","content":"","tool_calls":[
          {"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\", \"days\": 2}"}},
          {"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"sunny"},{"role":"tool","tool_call_id":"c2","content":"rain"}])");
    ojson hf = sent;
    hf[1]["tool_calls"][0]["function"]["arguments"] = ojson::parse(R"({"city": "Oslo", "days": 2})");
    hf[1]["tool_calls"][1]["function"]["arguments"] = ojson::parse(R"({"city": "Paris"})");
    cases.push_back({{{"messages", sent}, {"tools", tools}},
                     {{"messages", hf}, {"tools", tools}, {"add_generation_prompt", true}}});
  }
  std::vector<ojson> hf_vars;
  for (const Case& c : cases) {
    ojson v = c.hf_vars;
    v["eos_token"] = "<|im_end|>";
    hf_vars.push_back(v);
  }
  const std::vector<std::string> texts = reference_render(tmpl, hf_vars);
  ASSERT_EQ(texts.size(), cases.size());
  const std::vector<std::vector<TokenId>> want =
      oracle_encode("hf " + shell_quote((model / "tokenizer.json").string()) + " 0", texts);
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const CurlResponse t = server.post("/tokenize", cases[i].request.dump());
    ASSERT_EQ(t.status, 200) << t.body;
    EXPECT_EQ(json::parse(t.body)["tokens"].get<std::vector<TokenId>>(), want[i]) << "case " << i << ":\n" << texts[i];
    ojson chat = cases[i].request;
    chat["max_tokens"] = 3;
    chat["temperature"] = 0;
    if (chat.contains("tools")) chat["tool_choice"] = "none";
    const CurlResponse r = server.post("/v1/chat/completions", chat.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], want[i].size()) << "case " << i;
  }
}

}  // namespace
}  // namespace densa::testing
