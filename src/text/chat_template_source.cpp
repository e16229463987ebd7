#include "text/chat_template_source.h"

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "io/gguf_file.h"

namespace densa {
namespace {

Result<std::string> read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return not_found("cannot read " + p.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Result<std::string> from_tokenizer_config(const std::filesystem::path& p) {
  DENSA_ASSIGN_OR_RETURN(std::string text, read_text(p));
  nlohmann::json cfg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object()) return invalid_argument(p.string() + " is not a JSON object");
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) return not_found(p.string() + " has no chat_template");
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) return invalid_argument(p.string() + ": chat_template is neither a string nor a list");
  std::string names;
  for (const auto& e : *it) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
        !e["template"].is_string())
      return invalid_argument(p.string() + ": chat_template list entries must be {name, template} strings");
    if (e["name"] == "default") return e["template"].get<std::string>();
    names += (names.empty() ? "" : ", ") + e["name"].get<std::string>();
  }
  return invalid_argument(p.string() + ": chat_template list has no \"default\" entry (has: " + names + ")");
}

}  // namespace

Result<std::string> load_chat_template(const std::filesystem::path& model) {
  std::error_code ec;
  if (std::filesystem::is_directory(model, ec)) {
    const auto jinja = model / "chat_template.jinja";
    if (std::filesystem::exists(jinja, ec)) return read_text(jinja);
    const auto cfg = model / "tokenizer_config.json";
    if (std::filesystem::exists(cfg, ec)) return from_tokenizer_config(cfg);
    return not_found("no chat template in " + model.string() + " (looked for chat_template.jinja and tokenizer_config.json)");
  }
  if (model.filename() == "tokenizer_config.json") return from_tokenizer_config(model);
  if (!std::filesystem::exists(model, ec)) return not_found("no such model: " + model.string());
  DENSA_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(model));
  std::optional<std::string> t = gguf.get_string("tokenizer.chat_template");
  if (!t) return not_found(model.string() + " has no tokenizer.chat_template metadata");
  return *t;
}

}  // namespace densa
