// HF tokenizer directories through text/tokenizer_loader (load_tokenizer): the input is up to
// four files separated by fuzz::kPartSeparator - tokenizer.json, tokenizer_config.json,
// generation_config.json, chat_template.jinja (a file absent when the input has fewer parts).
// Any bytes load or give an error; a tokenizer that loads encodes and decodes text without
// fault (tokenizer_check.h), and the ids the config named lie inside its vocabulary.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "text/tokenizer_loader.h"
#include "tokenizer_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  static const fuzz::ScratchDir dir;
  static const char* const kFiles[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                                       "chat_template.jinja"};
  const auto parts = fuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data), size), 4);
  for (size_t i = 0; i < 4; ++i) {
    if (i < parts.size()) {
      dir.write(kFiles[i], parts[i]);
    } else {
      dir.drop(kFiles[i]);
    }
  }
  Result<LoadedTokenizer> loaded = load_tokenizer(dir.path());
  if (fuzz::verbose()) std::fprintf(stderr, "load_tokenizer: %s\n", loaded.status().to_string().c_str());
  if (!loaded.is_ok()) {
    FUZZ_ASSERT(!loaded.status().message().empty());
    return 0;
  }
  const Tokenizer& tok = loaded->tokenizer;
  FUZZ_ASSERT(tok.bos_id() < tok.vocab_size() && tok.eos_id() < tok.vocab_size());
  for (TokenId id : loaded->assets.eos_ids) FUZZ_ASSERT(id >= 0 && id < tok.vocab_size());
  fuzz::exercise_tokenizer(tok, parts[0]);
  return 0;
}
