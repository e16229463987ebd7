#pragma once
// Byte-pair encoding of one pre-tokenized word, shared by the HF, GGUF and tiktoken kinds.
//
// Symbols start as the word's bytes (byte-level vocabularies: every byte is a token) or its
// UTF-8 characters (character vocabularies, with <0xNN> byte fallback or unk for characters
// outside the vocabulary). Then the adjacent pair of lowest priority merges, leftmost first on
// ties, until no pair can merge. The priority of a pair is
//   - merges mode (tokenizer.json / GGUF): the rank of the pair (a, b) in the merges list;
//   - ranks mode (tiktoken): the rank of the concatenated bytes, which is also its id.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ids.h"

namespace densa {

class BpeModel {
 public:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using TokenMap = std::unordered_map<std::string, TokenId, Hash, std::equal_to<>>;

  bool byte_level = true;     // symbols start as bytes (else as UTF-8 characters)
  bool ranks_mode = false;    // tiktoken priorities
  bool ignore_merges = false; // a word that is a whole token is that token
  bool byte_fallback = false; // character mode: unknown characters as <0xNN> tokens
  bool fuse_unk = false;      // character mode: consecutive unknowns give one unk
  TokenId unk_id = -1;        // character mode without byte fallback; -1: none (dropped)

  TokenMap tokens;            // token bytes (byte-level) or text (character mode) -> id
  TokenId byte_ids[256];      // byte-level: the token of each single byte; fallback: <0xNN>
  // Merges mode: (left id << 32 | right id) -> (rank << 32 | merged id).
  std::unordered_map<uint64_t, uint64_t> merges;

  BpeModel() { std::fill(std::begin(byte_ids), std::end(byte_ids), -1); }

  // Appends the tokens of `word`.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

 private:
  struct Symbol {
    uint32_t begin, size;
    int32_t prev, next;
    TokenId id;  // -1: unknown character (character mode)
  };
  struct Candidate {
    uint32_t priority, left, left_size, right_size;
    TokenId id;
  };
  std::optional<std::pair<uint32_t, TokenId>> pair_priority(std::string_view word, const Symbol& a,
                                                            const Symbol& b) const;
  void initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const;
  void emit(std::string_view word, const Symbol& s, bool& last_unk, std::vector<TokenId>& out) const;
};

}  // namespace densa
