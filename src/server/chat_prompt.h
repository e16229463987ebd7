#pragma once
// The model's chat format, decided once at start-up: its own Jinja chat template (from the
// checkpoint, or `--chat-template FILE`), run as Hugging Face's apply_chat_template runs it,
// or, for a model that ships none, the documented plain fallback (server/chat_template.h);
// plus the tool-call and reasoning formats its output is parsed with. The origin of the
// template is named in the start-up log and in /v1/models.
#include <optional>
#include <string>
#include <vector>

#include "api/openai_request.h"
#include "core/status.h"
#include "model/model_weights.h"
#include "text/jinja/template.h"

namespace densa::server {

struct ChatFormat {
  std::optional<jinja::Template> jinja;  // nullopt: the plain fallback
  std::string origin;                    // where the template came from, or "plain fallback"
  std::string bos_token, eos_token;      // template variables
  std::string tool_parser;               // text/chat_parse name; "" when the model has none
  std::string reasoning_parser;          // "" when the model has none
  jinja::RenderLimits render_limits;     // every render's step / depth / output bounds
};

struct ChatFormatOptions {
  std::string template_file;     // --chat-template FILE; "" = the model's own
  std::string tool_parser;       // --tool-parser NAME; "" = guessed from the template, "none" = off
  std::string reasoning_parser;  // --reasoning-parser NAME; "" = guessed, "none" = off
  jinja::RenderLimits render_limits;  // --template-max-steps, --template-max-output-bytes
};

// Errors: a template that does not parse (with its line and column), an unreadable
// --chat-template file, an unknown parser name.
Result<ChatFormat> make_chat_format(const ModelWeights& weights, const ChatFormatOptions& options);

struct RenderedChat {
  std::string text;
  bool add_special_tokens = false;  // Jinja templates write their own BOS; the fallback does not
  std::vector<std::string> stop;    // stop strings of the plain fallback
  std::vector<std::string> stop_pieces;
  bool reasoning_open = false;      // the prompt ends inside a thinking block
};

// The template variables of a chat request, as vLLM passes them to apply_chat_template
// (text/chat_vars.h): messages as sent, text parts joined, null content as "", each tool
// call's `function.arguments` parsed into an object; tools; add_generation_prompt;
// bos_token / eos_token; chat_template_kwargs merged at the top level.
Result<nlohmann::ordered_json> chat_template_vars(const ChatFormat& format, const api::OpenAiRequest& request);

// Renders a chat request. Errors (invalid_argument): the template's raise_exception and any
// render error, with its message.
Result<RenderedChat> render_chat(const ChatFormat& format, const api::OpenAiRequest& request);

}  // namespace densa::server
