// `densa tokenize --tokenizer PATH [--add-special-tokens] --jsonl`: JSON strings on stdin,
// one per line; one JSON array of token ids per line on stdout. PATH: a tokenizer.json, a
// tiktoken.model, a tokenizer.model, a GGUF file or a model directory.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "text/tokenizer_loader.h"

namespace densa::cli {
namespace {

struct TokenizeArgs {
  std::string tokenizer;
  bool add_special = false;
  bool jsonl = false;
};

int run_tokenize(const TokenizeArgs& a) {
  if (!a.jsonl) {
    std::fprintf(stderr, "densa tokenize: only --jsonl input is supported; pass --jsonl\n");
    return 2;
  }
  Result<LoadedTokenizer> t = load_tokenizer(a.tokenizer);
  if (!t.is_ok()) {
    std::fprintf(stderr, "densa tokenize: %s\n", t.status().message().c_str());
    return 1;
  }
  const Tokenizer& tok = t->tokenizer;
  std::ios::sync_with_stdio(false);
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_string()) {
      std::fprintf(stderr, "densa tokenize: stdin line %zu is not a JSON string\n", line_no);
      return 1;
    }
    std::cout << nlohmann::json(tok.encode(j.get_ref<const std::string&>(), a.add_special)).dump() << '\n';
  }
  std::cout.flush();
  return 0;
}

const CommandRegistrar kRegistrar([](CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "encode JSON-string lines from stdin into token id arrays");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json, tiktoken.model, tokenizer.model, GGUF or model dir")
      ->required();
  cmd->add_flag("--add-special-tokens", args->add_special, "apply the tokenizer's BOS / EOS post-processing");
  cmd->add_flag("--jsonl", args->jsonl, "stdin: one JSON string per line; stdout: one JSON id array per line");
  cmd->callback([args] {
    if (int rc = run_tokenize(*args); rc != 0) throw CLI::RuntimeError(rc);
  });
});

}  // namespace
}  // namespace densa::cli
