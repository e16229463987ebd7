// Rendering a chat template: the Qwen3 template (Qwen-Qwen3-0.6B.jinja from the shared
// templates) on a 20-message conversation with three tools, tool calls and tool results, as
// the server renders one prompt per request. Also the one-time parse, and the OpenAI-request
// mapping (text/chat_vars) the server runs first.
//
//   ./build/chat_template_bench        (finds the templates via DENSA_SHARED_DIR, ../shared
//                                      beside the checkout, or /work/shared)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "text/chat_vars.h"
#include "text/jinja/template.h"

namespace densa {
namespace {

using Json = nlohmann::ordered_json;

std::string qwen3_template() {
  std::vector<std::filesystem::path> roots;
  if (const char* env = std::getenv("DENSA_SHARED_DIR")) roots.emplace_back(env);
  roots.push_back(std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "shared");
  roots.emplace_back("/work/shared");
  for (const auto& r : roots) {
    std::ifstream in(r / "templates/Qwen-Qwen3-0.6B.jinja", std::ios::binary);
    if (in) return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  return {};
}

Json tool(const std::string& name) {
  return Json::parse(R"({"type": "function", "function": {"name": ")" + name + R"(", "description": "Look things up.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "what"},
      "filters": {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
      "limit": {"type": "integer", "default": 10}}, "required": ["query"]}}})");
}

// 20 messages: system, then user / assistant turns with tool calls and results.
Json request() {
  Json messages = Json::array();
  messages.push_back({{"role", "system"}, {"content", "You are a helpful assistant. Answer briefly and use tools."}});
  for (int turn = 0; messages.size() < 20; ++turn) {
    messages.push_back({{"role", "user"}, {"content", "Question number " + std::to_string(turn) + ": what is in the news today?"}});
    if (messages.size() < 20)
      messages.push_back({{"role", "assistant"}, {"content", "Let me look."},
                          {"tool_calls", Json::array({{{"id", "call_" + std::to_string(turn)}, {"type", "function"},
                                                       {"function", {{"name", "search"}, {"arguments", R"({"query": "news", "limit": 3})"}}}}})}});
    if (messages.size() < 20) messages.push_back({{"role", "tool"}, {"tool_call_id", "call_" + std::to_string(turn)}, {"content", "Headline A. Headline B."}});
    if (messages.size() < 20)
      messages.push_back({{"role", "assistant"}, {"content", "Today: Headline A and Headline B."}, {"reasoning_content", "Summarise the tool output."}});
  }
  return {{"messages", messages}, {"tools", Json::array({tool("search"), tool("lookup"), tool("fetch")})}, {"add_generation_prompt", true}};
}

void BM_RenderQwen3(benchmark::State& state) {
  const std::string source = qwen3_template();
  if (source.empty()) return state.SkipWithError("Qwen-Qwen3-0.6B.jinja not found (set DENSA_SHARED_DIR)");
  Result<jinja::Template> t = jinja::Template::parse(source);
  Result<Json> vars = chat_template_vars(request(), {"", "<|im_end|>"});
  if (!t.is_ok() || !vars.is_ok()) return state.SkipWithError("parse / mapping failed");
  size_t bytes = 0;
  for (auto _ : state) {
    Result<std::string> out = t->render(*vars);
    if (!out.is_ok()) return state.SkipWithError(out.status().message().c_str());
    bytes = out->size();
    benchmark::DoNotOptimize(out->data());
  }
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderQwen3)->Unit(benchmark::kMicrosecond);

void BM_ParseQwen3(benchmark::State& state) {
  const std::string source = qwen3_template();
  if (source.empty()) return state.SkipWithError("Qwen-Qwen3-0.6B.jinja not found (set DENSA_SHARED_DIR)");
  for (auto _ : state) {
    Result<jinja::Template> t = jinja::Template::parse(source);
    benchmark::DoNotOptimize(&t);
  }
}
BENCHMARK(BM_ParseQwen3)->Unit(benchmark::kMicrosecond);

void BM_RequestToVars(benchmark::State& state) {
  const Json req = request();
  for (auto _ : state) {
    Result<Json> vars = chat_template_vars(req, {"", "<|im_end|>"});
    benchmark::DoNotOptimize(&vars);
  }
}
BENCHMARK(BM_RequestToVars)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace densa

BENCHMARK_MAIN();
