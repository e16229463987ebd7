#pragma once
// Hugging Face tokenizer.json (the "tokenizers" library format), BPE models only.
//
// Supported, everything else refused by name:
//   model         BPE: vocab, merges ("a b" strings or [a, b] pairs), byte_fallback,
//                 ignore_merges, unk_token, fuse_unk; dropout, continuing_subword_prefix and
//                 end_of_word_suffix only when unset (null / empty)
//   normalizer    NFC NFKC NFD NFKD Lowercase Strip Prepend Replace Sequence
//   pre_tokenizer Split (Regex | String; Removed Isolated MergedWithPrevious MergedWithNext
//                 Contiguous; invert) ByteLevel (last) Digits Metaspace Whitespace
//                 WhitespaceSplit Sequence
//   decoder       ByteLevel ByteFallback Fuse Strip Replace Metaspace Sequence
//   post_processor TemplateProcessing (single) ByteLevel RobertaProcessing BertProcessing Sequence
//   added_tokens  special, lstrip, rstrip, normalized, single_word
//   truncation    must be null; padding null or without a Fixed length
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "text/tokenizer.h"

namespace densa {

// Builds the parts from a parsed tokenizer.json; `origin` prefixes error messages. bos/eos ids
// are left at -1 (tokenizer_config.json names them; see tokenizer_loader.h), unk from unk_token.
Result<TokenizerParts> hf_tokenizer_parts(const nlohmann::json& j, const std::string& origin);
// Reads and parses a tokenizer.json file.
Result<TokenizerParts> read_hf_tokenizer_json(const std::filesystem::path& path);
Result<Tokenizer> load_hf_tokenizer_json(const std::filesystem::path& path);

}  // namespace densa
