#pragma once
// A grammar compiled against one vocabulary: the flat grammar plus, per terminal position, the
// tokens that position accepts on its own (whatever the enclosing rules) and the tokens whose
// fate depends on the enclosing rules (checked per state at mask time). Immutable once built,
// so one compiled grammar serves any number of matchers on any threads.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/flat_grammar.h"
#include "grammar/grammar.h"

namespace densa::grammar {

// The token vocabulary as bytes, independent of any tokenizer class: token id i decodes to
// token_bytes[i]. Special tokens (control tokens, eos included) are never produced by a
// grammar; the eos ids are allowed exactly when the grammar can end.
class Vocabulary {
 public:
  static Result<std::shared_ptr<const Vocabulary>> create(std::vector<std::string> token_bytes,
                                                           std::vector<int32_t> special_ids,
                                                           std::vector<int32_t> eos_ids);

  size_t size() const { return bytes_.size(); }
  size_t mask_words() const { return (bytes_.size() + 63) / 64; }
  const std::string& token_bytes(int32_t id) const { return bytes_[id]; }
  bool is_special(int32_t id) const { return special_[id] != 0; }
  bool is_eos(int32_t id) const { return eos_[id] != 0; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

  // A byte trie over the non-special, non-empty tokens, nodes in preorder; the tokens of a
  // subtree are sorted_ids()[tok_begin, tok_end), those ending at the node first.
  struct TrieNode {
    uint8_t byte = 0;
    int32_t end = 0;        // index past this node's subtree
    int32_t tok_begin = 0;
    int32_t tok_here = 0;   // tokens ending exactly here
    int32_t tok_end = 0;
  };
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& sorted_ids() const { return sorted_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<char> special_, eos_;
  std::vector<int32_t> eos_ids_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> sorted_;
};

struct CompileLimits {
  size_t max_elements = 200000;  // flat grammar size after expanding repetitions
  // Terminal positions to precompute token masks for; compile time is roughly linear in them
  // (a bounded repetition such as maxLength: N makes N copies of its element).
  size_t max_positions = 8000;
};

class CompiledGrammar {
 public:
  // Per terminal position: accepted tokens (a bitset when many, else sorted ids) and the
  // tokens to check against the full parse state.
  struct PositionMasks {
    std::vector<uint64_t> accepted_bits;
    std::vector<int32_t> accepted_ids;
    std::vector<int32_t> uncertain;
  };

  const FlatGrammar& flat() const { return flat_; }
  const Vocabulary& vocab() const { return *vocab_; }
  const PositionMasks& masks(int32_t pos) const { return masks_[mask_index_[pos]]; }
  // Sum over positions of the uncertain token counts (a cost indicator).
  size_t uncertain_total() const;
  size_t positions() const { return masks_.size(); }

 private:
  friend Result<std::shared_ptr<const CompiledGrammar>> compile(
      const Grammar&, std::shared_ptr<const Vocabulary>, const CompileLimits&);
  FlatGrammar flat_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::vector<int32_t> mask_index_;  // position -> masks_ index (-1 for non-terminals)
  std::vector<PositionMasks> masks_;
};

Result<std::shared_ptr<const CompiledGrammar>> compile(const Grammar& grammar,
                                                        std::shared_ptr<const Vocabulary> vocab,
                                                        const CompileLimits& limits = {});

}  // namespace densa::grammar
