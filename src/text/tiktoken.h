#pragma once
// tiktoken rank files: one "<base64 token bytes> <rank>" per line, the rank being the id and
// the BPE merge priority (lower merges first). The split pattern and the special tokens are
// not in the file: the model declares them (Kimi K2: tokenization_kimi.py and
// tokenizer_config.json added_tokens_decoder; see tokenizer_loader.h).
#include <filesystem>
#include <string>
#include <vector>

#include "text/pipeline.h"
#include "text/tokenizer.h"

namespace densa {

struct TiktokenSpec {
  std::string pattern;                      // PCRE2 split pattern
  std::vector<AddedToken> special_tokens;   // split out of the text before the pattern
};

// Parses the rank file text; `origin` names it in errors.
Result<TokenizerParts> tiktoken_parts(std::string_view text, const TiktokenSpec& spec, const std::string& origin);
Result<Tokenizer> load_tiktoken(const std::filesystem::path& path, const TiktokenSpec& spec);

}  // namespace densa
