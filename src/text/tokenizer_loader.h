#pragma once
// One entry point for every tokenizer a model can ship. Given a model directory it picks, in
// order: tokenizer.json (HF), tiktoken.model (Kimi K2 style tiktoken ranks), tokenizer.model
// (SentencePiece); and reads the text assets beside it: tokenizer_config.json (bos_token /
// eos_token as a string or {content}, add_bos_token / add_eos_token, chat_template as a string
// or a list of {name, template}, added_tokens_decoder for tiktoken), chat_template.jinja
// (preferred over the config's template), generation_config.json (eos_token_id, an int or a
// list). A file path may also be given: a tokenizer.json, a tiktoken.model, a tokenizer.model
// or a .gguf (tokenizer.ggml.*, tokenizer.chat_template); the files beside it are read too,
// except for GGUF.
#include <filesystem>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace densa {

struct NamedChatTemplate {
  std::string name;  // "default" for a plain string template
  std::string text;
};

struct TextAssets {
  std::string chat_template;                    // the default template; empty if none
  std::vector<NamedChatTemplate> chat_templates;  // every template the model ships
  std::string bos_token, eos_token;             // as the config names them; empty if none
  std::vector<TokenId> eos_ids;                 // every id that ends generation
};

struct LoadedTokenizer {
  Tokenizer tokenizer;
  TextAssets assets;
};

// Loads the tokenizer and text assets of a model directory or one of the files above.
// not_found when a directory holds no tokenizer file.
Result<LoadedTokenizer> load_tokenizer(const std::filesystem::path& path);
// True when the directory holds a file load_tokenizer can use.
bool has_tokenizer_files(const std::filesystem::path& dir);
// Reads only the text assets of a directory (no tokenizer): for checkpoints whose tokenizer
// comes from elsewhere. Token ids need a tokenizer and are left empty.
Result<TextAssets> read_text_assets(const std::filesystem::path& dir);

}  // namespace densa
