#pragma once
// What every tokenizer the loaders accept must do, whatever its files held: encode fixed
// strings and arbitrary bytes (invalid UTF-8 included) to ids inside the vocabulary, and
// decode them (whole, incrementally, special tokens kept or skipped) without fault.
#include <span>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "text/tokenizer.h"

namespace densa::fuzz {

inline void exercise_tokenizer(const Tokenizer& tok, std::string_view extra_text) {
  const std::string_view fixed[] = {
      "Hello world, caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 123456 <|im_start|>user\n",
      "  \t\r\n\r\n  ", "\xff\xfe\xc3", ""};
  std::vector<std::string_view> texts(std::begin(fixed), std::end(fixed));
  texts.push_back(extra_text.substr(0, 512));
  for (std::string_view t : texts) {
    for (bool special : {true, false}) {
      const std::vector<TokenId> ids = tok.encode(t, special);
      for (TokenId id : ids) FUZZ_ASSERT(id >= 0 && id < tok.vocab_size());
      (void)tok.decode(ids, true);
      (void)tok.decode(ids, false);
      size_t emitted = 0;
      for (size_t n = 1; n <= ids.size(); ++n) (void)tok.decode_incremental(std::span(ids).first(n), emitted);
      (void)tok.decode_incremental(ids, emitted, true);
    }
  }
  for (TokenId id : {0, tok.vocab_size() - 1, tok.bos_id(), tok.eos_id()}) {
    if (id < 0 || id >= tok.vocab_size()) continue;
    (void)tok.token_bytes(id);
    (void)tok.is_special(id);
    (void)tok.is_eos(id);
    const std::string& piece = tok.vocab().pieces[id];
    (void)tok.token_to_id(piece);
  }
  for (TokenId id : tok.eos_ids()) FUZZ_ASSERT(id >= 0 && id < tok.vocab_size());
}

}  // namespace densa::fuzz
