#pragma once
// SentencePiece BPE tokenizer with byte fallback (Llama style): a "▁" dummy prefix, no
// normalisation, merges by highest piece score, unknown bytes as <0xNN> tokens. Built from a
// tokenizer.model protobuf or from GGUF metadata (tokenizer.ggml.*).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace densa {

enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct TokenizerVocab {
  std::vector<std::string> pieces;   // [vocab] UTF-8 piece text ("▁" marks a space)
  std::vector<float> scores;         // [vocab]
  std::vector<TokenType> types;      // [vocab]
  TokenId bos_id = 1;
  TokenId eos_id = 2;
  TokenId unk_id = 0;
  bool add_bos = true;
  bool add_dummy_prefix = true;
};

class Tokenizer {
 public:
  static Result<Tokenizer> from_vocab(TokenizerVocab vocab);
  // Parses a SentencePiece ModelProto (tokenizer.model).
  static Result<Tokenizer> from_sentencepiece_file(const std::filesystem::path& path);

  // Encodes text; prepends BOS when add_bos.
  std::vector<TokenId> encode(std::string_view text, bool add_bos) const;
  // Decodes ids to text: "▁" -> " ", byte tokens -> raw bytes, control tokens dropped, and
  // the dummy-prefix space of the first piece removed.
  std::string decode(std::span<const TokenId> ids) const;
  // The piece of one token as bytes (byte tokens give their byte, "▁" -> " "), no stripping.
  std::string token_bytes(TokenId id) const;

  int vocab_size() const { return static_cast<int>(vocab_.pieces.size()); }
  TokenId bos_id() const { return vocab_.bos_id; }
  TokenId eos_id() const { return vocab_.eos_id; }
  const TokenizerVocab& vocab() const { return vocab_; }

 private:
  TokenizerVocab vocab_;
  std::unordered_map<std::string, TokenId> piece_to_id_;
  TokenId byte_ids_[256] = {};
};

}  // namespace densa
