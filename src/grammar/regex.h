#pragma once
// Regular expressions (an ECMAScript-like practical subset) as grammars. Supported: literal
// characters (UTF-8), escapes (\n \r \t \f \v \0 \xHH \uHHHH \u{H..} and escaped
// punctuation), classes [...] with ranges, negation and \d \w \s (\D \W \S) inside or outside,
// '.', quantifiers * + ? {m} {m,} {m,n} (a trailing lazy '?' is accepted: it does not change
// the language), groups (...), (?:...), (?<name>...), alternation |, and ^ / $ at the very
// start / end. Refused by name: backreferences, lookaround, \b \B, \p{..}, inline flags,
// possessive quantifiers, anchors elsewhere. The whole text must match (anchors implicit).
#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace densa::grammar {

enum class RegexEncoding {
  kUtf8,        // each character as its UTF-8 bytes
  kJsonString,  // each character as it may appear inside a JSON string literal: '"', '\' and
                // control characters only as escapes (\" \\ \n \t \r \b \f \u00XX)
};

struct RegexLimits {
  size_t max_length = 1 << 16;   // pattern bytes
  int max_nesting = 64;          // group depth
  int32_t max_repeat = 10000;    // m and n in {m,n}
};

struct RegexNode {
  int32_t node = -1;           // the expression in the target grammar
  bool anchored_start = false; // the pattern began with '^'
  bool anchored_end = false;   // the pattern ended with '$'
};

// Parses `pattern` into an expression of `g` (which gains nodes even on failure).
Result<RegexNode> parse_regex_into(std::string_view pattern, Grammar& g, RegexEncoding encoding,
                                   const RegexLimits& limits = {});

// A grammar whose language is the strings matching `pattern` as a whole.
Result<Grammar> grammar_from_regex(std::string_view pattern, const RegexLimits& limits = {});

// One character inside a JSON string literal, in `encoding` kJsonString form: every code
// point (as UTF-8 or as an escape), for unanchored JSON Schema patterns and plain strings.
int32_t json_string_char(Grammar& g);

}  // namespace densa::grammar
