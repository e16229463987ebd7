#pragma once
// The per-request side of constrained decoding: follows the tokens a sequence produced and
// says which tokens may come next. Cheap to create (start it lazily, e.g. at the token that
// opens a tool call); not thread-safe itself, while the CompiledGrammar it reads is shared.
// Masks depend only on the grammar and the tokens accepted so far (batch invariant).
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/pda.h"

namespace densa::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances by one token; false (state unchanged) when the grammar does not allow it. An eos
  // token is accepted exactly when the grammar can end, and terminates the matcher; other
  // special tokens are never accepted.
  bool accept_token(int32_t id);
  // Advances by raw bytes (text produced before the matcher started, e.g. the tail of a token
  // that opened a tool call); false (state unchanged) when they do not fit.
  bool accept_bytes(std::string_view bytes);

  // Writes the allowed next tokens: bit (id % 64) of words[id / 64]; n_words >=
  // vocab().mask_words() (words past the vocabulary are zeroed). Eos ids are set exactly when
  // the grammar can end; after termination nothing is allowed.
  void fill_mask(uint64_t* words, size_t n_words);
  std::vector<uint64_t> mask() {
    std::vector<uint64_t> m(grammar_->vocab().mask_words());
    fill_mask(m.data(), m.size());
    return m;
  }

  // The text so far is a complete sentence of the grammar.
  bool can_end() const;
  // Nothing more can be accepted: an eos was accepted, or the grammar is complete and cannot
  // be extended by any byte.
  bool is_terminated() const;

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  bool step_bytes(std::string_view bytes, std::vector<int32_t>& state);
  bool token_fits(const std::string& bytes);

  std::shared_ptr<const CompiledGrammar> grammar_;
  Pda pda_;
  std::vector<int32_t> state_;           // stack tops (kAccept marks a complete parse)
  std::vector<int32_t> scratch_a_, scratch_b_, positions_;
  bool eos_accepted_ = false;
};

}  // namespace densa::grammar
