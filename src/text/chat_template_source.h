#pragma once
// Where a model keeps its Jinja chat template: a Hugging Face directory's chat_template.jinja
// (which transformers prefers when present) or tokenizer_config.json `chat_template` (a string,
// or a list of {name, template} from which "default" is taken), or a GGUF file's
// `tokenizer.chat_template` metadata.
#include <filesystem>
#include <string>

#include "core/status.h"

namespace densa {

// Errors: not_found when the model has no chat template (naming where it looked),
// invalid_argument for a malformed tokenizer_config.json or a template list without "default".
Result<std::string> load_chat_template(const std::filesystem::path& model);

}  // namespace densa
