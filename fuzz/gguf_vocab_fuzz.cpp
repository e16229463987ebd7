// GGUF vocabularies (tokenizer.ggml.*) through text/gguf_bpe (gguf_tokenizer): the input is a
// GGUF file, seeded with gpt2-style (byte-level BPE: tokens, merges, token_type, pre, bos /
// eos / eot ids, add_bos / add_eos) and llama-style (SentencePiece: scores) vocabularies.
// Any bytes give a tokenizer, no tokenizer, or an error; a tokenizer encodes and decodes text
// without fault (tokenizer_check.h).
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "io/gguf_file.h"
#include "text/gguf_bpe.h"
#include "tokenizer_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  std::vector<uint8_t> bytes(data, data + size);
  Result<GgufFile> parsed = GgufFile::parse(MappedFile::from_bytes(std::move(bytes), "fuzz.gguf"));
  if (!parsed.is_ok()) return 0;
  Result<std::optional<Tokenizer>> tok = gguf_tokenizer(*parsed);
  if (fuzz::verbose()) std::fprintf(stderr, "gguf_tokenizer: %s\n", tok.status().to_string().c_str());
  if (!tok.is_ok()) {
    FUZZ_ASSERT(!tok.status().message().empty());
    return 0;
  }
  if (!tok->has_value()) return 0;
  const Tokenizer& t = **tok;
  FUZZ_ASSERT(t.bos_id() < t.vocab_size() && t.eos_id() < t.vocab_size());
  fuzz::exercise_tokenizer(t, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
