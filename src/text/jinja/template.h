#pragma once
// densa's Jinja engine: executes model chat templates as Hugging Face's apply_chat_template
// does (Jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
// loopcontrols extension; tojson with ensure_ascii=False; raise_exception and strftime_now
// globals), so that the rendered prompt is byte-equal to Jinja2's. Constructs the engine does
// not implement are refused with an error naming them and the template line and column.
//
// Parse once, render many: a Template is immutable after parse and may be rendered from several
// threads at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace densa::jinja {

struct ParsedTemplate;

// Bounds on one render, so hostile templates or variables fail with an error instead of
// exhausting the stack, the CPU or memory.
struct RenderLimits {
  int64_t max_steps = 2'000'000;           // statements + expressions evaluated
  int max_depth = 300;                     // nested evaluation (macro recursion, nesting)
  size_t max_output_bytes = 16u << 20;     // the rendered text, and any one string built
  // strftime_now()'s clock (Unix seconds, shown in local time); nullopt: the current time.
  std::optional<int64_t> now_unix;
};

class Template {
 public:
  // Errors: invalid_argument naming the line and column (syntax error, unknown filter / test,
  // unsupported statement, unclosed block).
  static Result<Template> parse(std::string_view source);

  // Renders with `vars` (a JSON object: messages, tools, add_generation_prompt, bos_token, ...).
  // Object key order is kept (ordered_json), as Python dicts keep it; tojson and `items()` show
  // it. Errors: invalid_argument for template errors (with line / column) and for the
  // template's own raise_exception(msg) (the message is msg); resource_exhausted for a limit.
  Result<std::string> render(const nlohmann::ordered_json& vars, const RenderLimits& limits = {}) const;
  // The same from nlohmann::json (whose objects are key-sorted: prefer ordered_json).
  Result<std::string> render(const nlohmann::json& vars, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const ParsedTemplate> parsed_;
};

}  // namespace densa::jinja
