// SentencePiece ModelProto (text/sentencepiece_model): any bytes either parse or give an
// error; a model that parses and builds a tokenizer encodes and decodes text without fault,
// and every id it produces is inside the vocabulary.
#include <cstdint>
#include <span>
#include <string_view>

#include "fuzz_util.h"
#include "text/sentencepiece_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  Result<SentencePieceModel> parsed = parse_sentencepiece_model(std::span<const uint8_t>(data, size));
  if (!parsed.is_ok()) return 0;
  Result<Tokenizer> tok = Tokenizer::from_vocab(parsed->vocab);
  if (!tok.is_ok()) return 0;
  // The model's own bytes double as text: arbitrary bytes, invalid UTF-8 included.
  const std::string_view text(reinterpret_cast<const char*>(data), size < 256 ? size : 256);
  for (std::string_view t : {std::string_view("Hello world, \xe2\x96\x81 caf\xc3\xa9 \xf0\x9f\x98\x80"), text}) {
    const std::vector<TokenId> ids = tok->encode(t, true);
    for (TokenId id : ids) FUZZ_ASSERT(id >= 0 && id < tok->vocab_size());
    (void)tok->decode(ids);
    size_t emitted = 0;
    for (size_t n = 1; n <= ids.size(); ++n) (void)tok->decode_incremental(std::span(ids).first(n), emitted);
    (void)tok->decode_incremental(ids, emitted, true);
  }
  return 0;
}
