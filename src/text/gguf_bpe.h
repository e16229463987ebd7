#pragma once
// GGUF vocabularies (tokenizer.ggml.*): model "llama" (SentencePiece) and "gpt2" (byte-level
// BPE with tokens, merges, token_type, bos / eos ids and a "pre" type naming the split
// regexes). Supported pre types: qwen2, deepseek-v3, glm4, kimi-k2, llama-bpe; any other is
// refused by name.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_file.h"
#include "text/tokenizer.h"

namespace densa {

// The split regexes (PCRE2, applied in order, each Isolated) of a llama.cpp pre type.
Result<std::vector<std::string>> gguf_pre_patterns(std::string_view pre);
// The pre type whose patterns are exactly `patterns`, if any (for writers).
std::optional<std::string> gguf_pre_name(const std::vector<std::string>& patterns);
// Kimi K2's split pattern (tokenization_kimi.py) with its class intersections
// [X&&[^\p{Han}]] written as (?:(?!\p{sc:Han})[X]), which PCRE2 can run. \p{sc:Han} is the
// Han script property: a bare \p{Han} means Script_Extensions in PCRE2 >= 10.40 (and then
// matches e.g. "、"), which is not what the Python regex module / tiktoken match.
extern const char* const kKimiPattern;

// The tokenizer of a GGUF file; nullopt when it has no tokenizer.ggml.tokens. Models other
// than llama / gpt2 are refused by name.
Result<std::optional<Tokenizer>> gguf_tokenizer(const GgufFile& f);

}  // namespace densa
