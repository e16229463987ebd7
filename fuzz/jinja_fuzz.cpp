// The Jinja engine (text/jinja): the input is a template, then (after fuzz::kPartSeparator)
// the render variables as JSON (default variables when absent or not a JSON object). Any
// bytes parse or give an error; a template that parses renders or gives an error, and hostile
// templates (unbounded recursion, huge loops, 'a' * 10**9, range(10**10), deep nesting) stop
// at the render limits with resource_exhausted - never the stack or memory. Rendered output
// never exceeds the output limit. Rendering runs under small limits so the fuzzer stays fast;
// a template starting with the comment "{#defaults#}" runs under the engine's defaults (the
// hostile inputs fuzz/regressions/jinja/defaults_* do, so the replays prove the defaults hold).
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "jinja_fuzz_util.h"
#include "text/jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  using ojson = nlohmann::ordered_json;
  const auto parts = fuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data), size), 2);
  const std::string_view source = parts[0];
  ojson vars;
  if (parts.size() > 1) vars = ojson::parse(parts[1], nullptr, /*allow_exceptions=*/false);
  if (!vars.is_object()) {
    vars = ojson::parse(R"({"bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
      "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello", "tool_calls": [{"type": "function",
                    "function": {"name": "f", "arguments": {"x": 1}}}]}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})");
  }
  Result<jinja::Template> t = jinja::Template::parse(source);
  if (fuzz::verbose()) std::fprintf(stderr, "parse: %s\n", t.status().to_string().substr(0, 200).c_str());
  if (!t.is_ok()) {
    FUZZ_ASSERT(t.status().code() == StatusCode::kInvalidArgument && !t.status().message().empty());
    return 0;
  }
  jinja::RenderLimits limits;
  if (!source.starts_with("{#defaults#}")) {
    limits.max_steps = 100'000;
    limits.max_output_bytes = 1 << 20;
  }
  limits.now_unix = 1'700'000'000;
  fuzz::check_render(t->render(vars, limits), limits);
  return 0;
}
