#pragma once
// The flat form a Grammar compiles to (internal to src/grammar): every rule a list of
// alternatives, every alternative a run of elements in one array ending in kEnd. A position is
// an index into that array. Repetition and nested alternation are lowered into extra rules in
// continuation style (the rest of the enclosing sequence becomes a rule called in tail
// position), so a parse rarely leaves the rule it started in mid-token; see README.md.
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace densa::grammar {

constexpr int32_t kEnd = -1;           // element: end of an alternative
inline int32_t ref_element(int32_t rule) { return -rule - 2; }
inline int32_t element_rule(int32_t e) { return -e - 2; }  // e < kEnd
inline bool is_terminal(int32_t e) { return e >= 0; }      // index into sets

struct FlatGrammar {
  std::vector<int32_t> elems;               // terminals (set index), refs, kEnd
  std::vector<std::vector<int32_t>> alts;   // per rule: start positions of its alternatives
  std::vector<ByteSet> sets;                // distinct byte sets
  std::vector<std::string> rule_names;      // per rule (anonymous rules name their origin)
  int32_t root = -1;
};

// Lowers `g` (root set, every referenced rule defined) to flat form; refuses grammars over
// max_elements elements and left-recursive rules (which the parser cannot expand), by name.
Result<FlatGrammar> lower_grammar(const Grammar& g, size_t max_elements);

}  // namespace densa::grammar
