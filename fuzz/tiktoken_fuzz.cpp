// tiktoken rank files with Kimi K2's declaration through text/tokenizer_loader: the input is
// tiktoken.model, then (after fuzz::kPartSeparator) the tokenizer_config.json whose
// added_tokens_decoder names the special tokens (the Kimi split pattern is fixed, as Kimi
// ships it in code). Any bytes load or give an error; a tokenizer that loads encodes and
// decodes text without fault (tokenizer_check.h). A second pass feeds the rank text alone
// through tiktoken_parts with a simple pattern, reaching the rank parser without PCRE2's cost.
#include <cstdint>
#include <cstdio>
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "text/tiktoken.h"
#include "text/tokenizer_loader.h"
#include "tokenizer_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  static const fuzz::ScratchDir dir;
  const auto parts = fuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data), size), 2);
  dir.write("tiktoken.model", parts[0]);
  if (parts.size() > 1) {
    dir.write("tokenizer_config.json", parts[1]);
  } else {
    dir.drop("tokenizer_config.json");
  }
  Result<LoadedTokenizer> loaded = load_tokenizer(dir.path());
  if (fuzz::verbose()) std::fprintf(stderr, "load_tokenizer: %s\n", loaded.status().to_string().c_str());
  if (loaded.is_ok()) {
    fuzz::exercise_tokenizer(loaded->tokenizer, parts[0]);
  } else {
    FUZZ_ASSERT(!loaded.status().message().empty());
  }

  TiktokenSpec spec;
  spec.pattern = R"( ?\p{L}+| ?\p{N}+|\s+|.)";
  AddedToken eot;
  eot.content = "<|endoftext|>";
  eot.special = true;
  size_t lines = 0;
  for (char c : parts[0]) lines += c == '\n';
  eot.id = static_cast<TokenId>(lines + 1);
  spec.special_tokens.push_back(eot);
  Result<TokenizerParts> tp = tiktoken_parts(parts[0], spec, "fuzz.tiktoken");
  if (!tp.is_ok()) return 0;
  Result<Tokenizer> tok = Tokenizer::from_parts(std::move(tp).value());
  if (tok.is_ok()) fuzz::exercise_tokenizer(*tok, parts[0]);
  return 0;
}
