// `densa chat-template`: renders a model's (or a file's) Jinja chat template with the given
// variables and prints the prompt exactly, with no newline added.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include "cli/command.h"
#include "text/chat_template_source.h"
#include "text/jinja/template.h"

namespace densa::cli {
namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Status run(const std::string& model, const std::string& template_file, const std::string& vars_file) {
  if (model.empty() == template_file.empty()) return invalid_argument("give exactly one of --model and --template");
  std::string source;
  if (!model.empty()) {
    DENSA_ASSIGN_OR_RETURN(source, load_chat_template(model));
  } else {
    DENSA_ASSIGN_OR_RETURN(source, read_file(template_file));
  }
  DENSA_ASSIGN_OR_RETURN(std::string vars_text, read_file(vars_file));
  nlohmann::ordered_json vars = nlohmann::ordered_json::parse(vars_text, nullptr, /*allow_exceptions=*/false);
  if (vars.is_discarded()) return invalid_argument(vars_file + " is not valid JSON");
  DENSA_ASSIGN_OR_RETURN(jinja::Template tmpl, jinja::Template::parse(source));
  DENSA_ASSIGN_OR_RETURN(std::string prompt, tmpl.render(vars));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return Status::ok();
}

const CommandRegistrar kRegister([](CLI::App& app) {
  auto model = std::make_shared<std::string>(), tmpl = std::make_shared<std::string>(),
       vars = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("chat-template", "render a Jinja chat template as Hugging Face does");
  cmd->add_option("-m,--model", *model, "HF model directory (chat_template.jinja / tokenizer_config.json) or GGUF file");
  cmd->add_option("-t,--template", *tmpl, "a Jinja template file");
  cmd->add_option("--vars", *vars, "JSON object of template variables (messages, tools, add_generation_prompt, ...)")
      ->required();
  cmd->callback([model, tmpl, vars] {
    const Status s = run(*model, *tmpl, *vars);
    if (!s.is_ok()) {
      std::fprintf(stderr, "densa chat-template: %s\n", s.message().c_str());
      throw CLI::RuntimeError(1);
    }
  });
});

}  // namespace
}  // namespace densa::cli
