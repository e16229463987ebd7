#pragma once
// densa::Tokenizer: the one tokenizer interface of densa. A cheap-to-copy value (the tables
// are shared, immutable, safe to use from many threads) over one of several kinds:
//   - SentencePiece BPE with byte fallback (tokenizer.model, GGUF tokenizer.ggml.model=llama)
//   - Hugging Face tokenizer.json BPE pipelines (text/hf_tokenizer.h)
//   - GGUF tokenizer.ggml.model=gpt2 byte-level BPE (text/gguf_bpe.h)
//   - tiktoken rank files (text/tiktoken.h)
// Loaders that take a model directory live in text/tokenizer_loader.h.
//
// Common model of every kind: an id space [0, vocab_size) where each id has a piece (its
// vocabulary string as the file spells it), a type, and the bytes it decodes to. Special
// tokens (TokenType::kControl) are skipped by decode(ids, skip_special=true).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
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
  std::vector<std::string> pieces;   // [vocab] piece text as stored ("▁" / "Ġ" marks a space)
  std::vector<float> scores;         // [vocab] SentencePiece scores (0 for the other kinds)
  std::vector<TokenType> types;      // [vocab]
  TokenId bos_id = 1;                // -1 when the tokenizer has none
  TokenId eos_id = 2;                // -1 when the tokenizer has none
  TokenId unk_id = 0;                // -1 when the tokenizer has none
  bool add_bos = true;               // encode(text, add_special_tokens=true) prepends bos_id
  bool add_dummy_prefix = true;      // SentencePiece: a "▁" is put before the text
};

// Encodes ordinary text (no post-processing) into ids; one implementation per tokenizer kind.
class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  virtual void encode(std::string_view text, std::vector<TokenId>& out) const = 0;
};

// What a BPE vocabulary looks like in GGUF (tokenizer.ggml.*), for writers.
struct GgufBpeExport {
  std::string pre;                    // tokenizer.ggml.pre
  std::vector<std::string> tokens;    // byte-level strings
  std::vector<std::string> merges;    // "a b"
  std::vector<int32_t> token_types;   // TokenType values
};

// Everything a tokenizer is made of; the loaders fill it and Tokenizer::from_parts checks it.
struct TokenizerParts {
  std::string kind;                      // "sentencepiece", "hf-bpe", "gguf-bpe", "tiktoken"
  TokenizerVocab vocab;                  // pieces and types of every id (holes: empty, kUnused)
  std::vector<std::string> decoded;      // [vocab] bytes decode() emits for the id
  std::vector<uint8_t> strippable;       // [vocab] 1: a leading strip_char may be stripped
  int strip_count = 0;                   // up to this many strip_char are stripped at the start
  char strip_char = ' ';
  std::vector<TokenId> prefix, suffix;   // added around the ids when add_special_tokens
  std::vector<TokenId> eos_ids;          // every id that ends generation (eos_id first)
  std::shared_ptr<const TextEncoder> encoder;
  std::shared_ptr<const GgufBpeExport> gguf_export;  // null when not expressible as GGUF BPE
  bool byte_fallback = false;            // SentencePiece: all 256 <0xNN> pieces exist
};

// Special-token settings from a model's config files (tokenizer_config.json,
// generation_config.json); unset fields keep the tokenizer's own.
struct SpecialTokenConfig {
  std::optional<TokenId> bos_id, eos_id;
  std::optional<bool> add_bos, add_eos;  // replace the post-processor's BOS / EOS
  std::vector<TokenId> eos_ids;          // more ids that end generation
};

class Tokenizer {
 public:
  // SentencePiece BPE from its vocabulary (GGUF llama metadata) or a ModelProto file.
  static Result<Tokenizer> from_vocab(TokenizerVocab vocab);
  static Result<Tokenizer> from_sentencepiece_file(const std::filesystem::path& path);
  // Checks the tables and builds the lookup maps.
  static Result<Tokenizer> from_parts(TokenizerParts parts);

  // A copy with the config applied; fails when it names ids outside the vocabulary or asks
  // for a BOS / EOS the tokenizer does not have.
  Result<Tokenizer> with_config(const SpecialTokenConfig& config) const;

  // Encodes text. With add_special_tokens the kind's post-processing (BOS / EOS) is applied.
  // Whether special-token text inside `text` becomes special ids is the kind's rule: yes for
  // tokenizer.json / GGUF BPE / tiktoken (as Hugging Face does), no for SentencePiece.
  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens) const;
  // Decodes ids to bytes (raw: an incomplete UTF-8 sequence is not replaced). Special tokens
  // are dropped when skip_special, else give their text; out-of-range ids give nothing.
  std::string decode(std::span<const TokenId> ids, bool skip_special = true) const;
  // The bytes of one token as it decodes mid-text (no start-of-text stripping). Special and
  // unknown tokens give their piece text (e.g. "</s>"); out-of-range ids give "".
  std::string token_bytes(TokenId id) const;

  // Streaming decode. `emitted_bytes` is how many bytes of decode(ids) the caller already has
  // (start at 0 and pass the same variable each call, with ids growing by appending). Returns
  // the bytes of decode(ids) after them, holding back a trailing incomplete UTF-8 sequence
  // until a later token completes it; `flush` (end of stream) returns everything. Advances
  // emitted_bytes by the returned size. Cost: O(ids.size()) table lookups + the new bytes.
  // skip_special: as decode()'s (special tokens give their text when false).
  std::string decode_incremental(std::span<const TokenId> ids, size_t& emitted_bytes,
                                 bool flush = false, bool skip_special = true) const;

  int vocab_size() const { return static_cast<int>(s_->parts.vocab.pieces.size()); }
  TokenId bos_id() const { return s_->parts.vocab.bos_id; }
  TokenId eos_id() const { return s_->parts.vocab.eos_id; }
  // Every id that ends generation (generation_config.json may list several); eos_id first.
  const std::vector<TokenId>& eos_ids() const { return s_->parts.eos_ids; }
  bool is_eos(TokenId id) const;
  bool is_special(TokenId id) const;
  bool add_bos() const { return !s_->parts.prefix.empty(); }
  // The id whose piece is exactly `piece` (special tokens: their text), if any.
  std::optional<TokenId> token_to_id(std::string_view piece) const;
  // A hash of the kind, every piece and type, and bos/eos: equal fingerprints mean the same
  // id <-> text mapping.
  uint64_t fingerprint() const { return s_->fingerprint; }
  const std::string& kind() const { return s_->parts.kind; }
  const TokenizerVocab& vocab() const { return s_->parts.vocab; }
  // GGUF tokenizer.ggml.* tables for writers; null when this tokenizer has none.
  const GgufBpeExport* gguf_export() const { return s_->parts.gguf_export.get(); }
  // SentencePiece: true when all 256 <0xNN> byte pieces exist (characters outside the
  // vocabulary encode as their UTF-8 bytes; otherwise as unk_id).
  bool byte_fallback() const { return s_->parts.byte_fallback; }

 private:
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct State {
    TokenizerParts parts;
    std::unordered_map<std::string, TokenId, PieceHash, std::equal_to<>> piece_to_id;  // first id wins
    uint64_t fingerprint = 0;
  };

  // Appends the decoded bytes of `id`; `strip_left` counts the start-of-text strips left.
  void append_decoded(TokenId id, bool skip_special, int& strip_left, std::string& out) const;
  size_t decoded_size(TokenId id, bool skip_special, int& strip_left) const;

  std::shared_ptr<const State> s_;
};

// Length of the UTF-8 character at s[pos], or 1 when the bytes there are not well-formed UTF-8.
size_t utf8_char_size(std::string_view s, size_t pos);
// True when s is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);

}  // namespace densa
