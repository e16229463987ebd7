#pragma once
// SentencePiece BPE tokenizer with byte fallback (Llama style): a "▁" dummy prefix, no
// normalisation, merges by highest piece score, unknown bytes as <0xNN> tokens. Built from a
// tokenizer.model protobuf or from GGUF metadata (tokenizer.ggml.*).
#include <cstdint>
#include <filesystem>
#include <functional>
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

  // Encodes text; prepends BOS when add_bos. Empty text gives no pieces. Characters outside the
  // vocabulary become <0xNN> byte tokens (or unk without byte fallback); invalid UTF-8 bytes
  // too. A literal "▁" in text encodes like a space (as in SentencePiece).
  std::vector<TokenId> encode(std::string_view text, bool add_bos) const;
  // Decodes ids to text: "▁" -> " ", byte tokens -> raw bytes, control tokens dropped, and
  // the dummy-prefix space of the first piece removed.
  std::string decode(std::span<const TokenId> ids) const;
  // The piece of one token as bytes (byte tokens give their byte, "▁" -> " "), no stripping.
  // Control and unknown tokens give their piece text (e.g. "</s>"); out-of-range ids give "".
  std::string token_bytes(TokenId id) const;

  // Streaming decode. `emitted_bytes` is how many bytes of decode(ids) the caller already has
  // (start at 0 and pass the same variable each call, with ids growing by appending). Returns
  // the bytes of decode(ids) after them, holding back a trailing incomplete UTF-8 sequence
  // until a later token completes it; `flush` (end of stream) returns everything. Advances
  // emitted_bytes by the returned size. Cost: O(ids.size()) table lookups + the new bytes.
  std::string decode_incremental(std::span<const TokenId> ids, size_t& emitted_bytes,
                                 bool flush = false) const;

  // True when all 256 <0xNN> byte pieces exist: characters outside the vocabulary encode as
  // their UTF-8 bytes; otherwise as unk_id.
  bool byte_fallback() const { return byte_fallback_; }

  int vocab_size() const { return static_cast<int>(vocab_.pieces.size()); }
  TokenId bos_id() const { return vocab_.bos_id; }
  TokenId eos_id() const { return vocab_.eos_id; }
  const TokenizerVocab& vocab() const { return vocab_; }

 private:
  // Lets the piece maps be searched with a string_view into the text being encoded.
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using PieceMap = std::unordered_map<std::string, TokenId, PieceHash, std::equal_to<>>;

  struct EncodeScratch;  // BPE symbol list + merge queue, defined in tokenizer.cpp

  void encode_normalized(std::string_view text, std::vector<TokenId>& out) const;
  void encode_run(std::string_view text, EncodeScratch& scratch, bool& last_was_unk,
                  std::vector<TokenId>& out) const;
  // Byte tokens for `piece` (byte fallback), else one unk per run of unknown text.
  void emit_unknown(std::string_view piece, bool& last_was_unk, std::vector<TokenId>& out) const;
  // Appends the decoded text of `id`; `at_start` is true until the first piece is emitted.
  void append_decoded(TokenId id, bool& at_start, std::string& out) const;
  size_t decoded_size(TokenId id, bool& at_start) const;

  TokenizerVocab vocab_;
  std::unordered_map<std::string, TokenId> piece_to_id_;  // every piece, first id wins
  PieceMap merge_ids_;                  // normal + user-defined pieces: what BPE may produce
  std::vector<std::string> user_defined_;  // matched whole before BPE, longest first
  std::vector<std::string> decoded_;    // [vocab] decode() text per id ("" for control/unknown)
  std::vector<uint8_t> dummy_prefix_;   // [vocab] 1 when the piece starts with "▁" (not a byte)
  TokenId byte_ids_[256] = {};
  bool piece_byte_[256] = {};  // bytes that occur in some mergeable piece; others split runs
  bool byte_fallback_ = false;
};

}  // namespace densa
