#pragma once
// The encoding pipeline of Hugging Face tokenizer.json files, also used for GGUF gpt2 and
// tiktoken vocabularies:
//   added tokens split out of the raw text (longest match first)  ->  per remaining segment:
//   normalizers  ->  added tokens marked "normalized" split out  ->  pre-tokenizers  ->  BPE.
// Bytes that are not valid UTF-8 skip normalization and pre-tokenization: each is its own word.
#include <array>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

#include "text/bpe.h"
#include "text/regex.h"
#include "text/tokenizer.h"

namespace densa {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct NormalizerStep {
  enum class Kind { kNfc, kNfkc, kNfd, kNfkd, kLowercase, kStrip, kPrepend, kReplace };
  Kind kind = Kind::kNfc;
  bool left = false, right = false;  // Strip: which ends
  std::string content;               // Prepend: the text; Replace: the replacement
  std::string literal;               // Replace: a String pattern
  std::optional<Regex> regex;        // Replace: a Regex pattern
};

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  enum class Prepend { kAlways, kFirst, kNever };
  Kind kind = Kind::kSplit;
  // Split: a Regex or a String (literal) pattern.
  std::optional<Regex> regex;
  std::string literal;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // ByteLevel: prefix each word with a space; regex = the GPT-2 pattern when use_regex.
  bool add_prefix_space = false;
  // Metaspace.
  std::string replacement;
  Prepend prepend = Prepend::kAlways;
  bool split = true;
};

struct AddedToken {
  std::string content;
  TokenId id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// The GPT-2 split pattern that ByteLevel applies when use_regex is set.
extern const char* const kGpt2Pattern;

// Applies one Split to `text`: the pieces it gives, empty ones dropped.
void split_pieces(std::string_view text, const PreTokenizerStep& step, std::vector<std::string>& out);
// Applies the normalizers in order.
void apply_normalizers(const std::vector<NormalizerStep>& steps, std::string& text);

class PipelineEncoder final : public TextEncoder {
 public:
  std::vector<NormalizerStep> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizers;
  BpeModel bpe;

  // Installs the added tokens (empty content is refused by the loaders before this).
  void set_added_tokens(const std::vector<AddedToken>& tokens);
  void encode(std::string_view text, std::vector<TokenId>& out) const override;

  // Pre-tokenizes one normalized segment; `at_start`: it begins the original text.
  void pre_tokenize(std::string_view text, bool at_start, std::vector<std::string>& words) const;

 private:
  struct Trie {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> next;
      int32_t token = -1;  // index into tokens
    };
    std::vector<Node> nodes{1};
    std::vector<AddedToken> tokens;
    void add(const AddedToken& t);
    bool empty() const { return tokens.empty(); }
  };
  struct Match {
    size_t begin, end;
    TokenId id;
  };
  // Non-overlapping added-token matches in text: leftmost, then longest; lstrip / rstrip
  // widen a match over whitespace, single_word rejects one inside a word.
  static void find_added(const Trie& trie, std::string_view text, std::vector<Match>& out);
  void encode_plain(std::string_view text, bool at_start, std::vector<TokenId>& out) const;
  void encode_normalized(std::string_view text, bool at_start, std::vector<TokenId>& out) const;

  // Words seen before and their tokens: BPE of a word depends only on the word. Sharded by
  // hash, each shard bounded (cleared when full), so it is safe and cheap from many threads.
  struct CacheShard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<TokenId>> map;
  };
  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheShardWords = 8192;
  static constexpr size_t kCacheMaxWordBytes = 64;
  void encode_word_cached(const std::string& word, std::vector<TokenId>& out) const;

  Trie raw_added_, normalized_added_;
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace densa
